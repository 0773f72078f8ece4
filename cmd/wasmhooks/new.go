package main

import "io"

const newSynopsis = `  wasmhooks new --lang go|rust|c|assemblyscript NAME
`

func cmdNew(args []string, stdout, stderr io.Writer) int { return exitUsage }
