package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegularFile means a path given as a module (or another input file)
// names a device, a pipe, a directory or a socket: /dev/zero would be read
// until memory runs out, a FIFO would block.
var ErrNotRegularFile = errors.New("runtime: not a regular file")

// ReadModuleFile reads the module at path, refusing what Load would refuse
// for its size before reading it whole: a path that is not a regular file
// (after symbolic links) gets an error wrapping ErrNotRegularFile, and a file
// over maxBytes (zero means DefaultMaxModuleBytes, as Config.MaxModuleBytes)
// a *LimitError "module_bytes". A file that grows while it is read is cut at
// maxBytes+1 and refused the same way, so at most maxBytes+1 bytes are ever
// held. Use it (or ReadFileLimit) for every file a module's bytes come from.
func ReadModuleFile(path string, maxBytes int) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxModuleBytes
	}
	return ReadFileLimit(path, maxBytes, "module_bytes")
}

// ReadFileLimit reads the regular file at path, refusing one over maxBytes
// (> 0) with a *LimitError naming limit, and a path that is not a regular
// file with an error wrapping ErrNotRegularFile. See ReadModuleFile.
func ReadFileLimit(path string, maxBytes int, limit string) ([]byte, error) {
	// Stat before opening: opening a named pipe would block until a
	// writer came. Then again on what was opened, in case the path was
	// swapped in between.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegularFile, path, fileKind(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegularFile, path, fileKind(st.Mode()))
	}
	if st.Size() > int64(maxBytes) {
		return nil, fmt.Errorf("%s: %w", path, &LimitError{Limit: limit, Max: uint64(maxBytes), Got: uint64(st.Size())})
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(maxBytes)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBytes {
		return nil, fmt.Errorf("%s: %w", path, &LimitError{Limit: limit, Max: uint64(maxBytes), Got: uint64(len(data))})
	}
	return data, nil
}

// fileKind names a non-regular file's type for an error message.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "non-regular file"
}
