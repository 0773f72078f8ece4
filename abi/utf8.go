package abi

import "bytes"

// LostUTF8 reports whether enc, a JSON encoding made by AppendJSON, Marshal
// or Object.SetMap, stands for a string that was not valid UTF-8. Those
// encoders write each byte that is not UTF-8 as the escape \ufffd, which
// reads back as U+FFFD, and write U+FFFD itself unescaped: so the escape is
// in enc, with its backslash not itself escaped, only where a byte was
// lost. (A strict parse of JSON text can hold the escape for other reasons:
// LostUTF8 is for these encoders' output alone.)
func LostUTF8(enc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(enc[i:], []byte(`\ufffd`))
		if j < 0 {
			return false
		}
		at := i + j
		n := 0 // backslashes just before the escape's own
		for at-1-n >= 0 && enc[at-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = at + 1
	}
}
