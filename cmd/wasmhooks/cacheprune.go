package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// maxCacheBytes bounds the CLI's compilation cache (--cache-dir, default
// <user cache dir>/wasmhooks): each module compiled and each CLI build adds
// its code (about 20 MB for a Go hook), and nothing else ever removes it.
// Past the bound, pruneCache removes the least recently written files until
// the cache is at three quarters of it. A removed entry only costs a compile.
const maxCacheBytes = 1 << 30

// cacheGrace keeps files younger than this: another wasmhooks process may
// just have written them.
const cacheGrace = time.Minute

// cacheSubdirs are the runtime's subdirectories of Config.CacheDir
// (runtime.New: wazero's code, with and without interrupt checks; the
// module cache, runtime/modcache.go). Only files under them are pruned:
// --cache-dir may name a directory that holds other things too.
var cacheSubdirs = []string{"interrupt", "nointerrupt", "modules"}

// pruneCache bounds the runtime's files under the cache directory dir to
// max bytes. Errors are ignored: the cache only saves time.
func pruneCache(dir string, max int64) {
	if dir == "" {
		return
	}
	type entry struct {
		path string
		size int64
		mod  time.Time
	}
	var (
		files []entry
		total int64
	)
	for _, sub := range cacheSubdirs {
		_ = filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			files = append(files, entry{p, info.Size(), info.ModTime()})
			total += info.Size()
			return nil
		})
	}
	if total <= max {
		return
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	now := time.Now()
	for _, f := range files {
		if total <= max/4*3 {
			return
		}
		if now.Sub(f.mod) < cacheGrace {
			continue
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
}
