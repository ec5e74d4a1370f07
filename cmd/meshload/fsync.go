package main

import (
	"context"
	"fmt"
	"os"
)

// fsyncFileSize is the size of the probe's file: its 4 KiB pages are
// overwritten in turn, as bbolt overwrites the pages of a file it has
// already grown.
const fsyncFileSize = 1 << 20

// runFsync measures the disk a bbolt store on dir would commit to: -d of
// 4 KiB writes, each followed by fdatasync, on a preallocated file in dir
// (removed afterwards). The report's DiskLimit is inFlight ÷ the p50: the
// most commits a second if each fdatasync carried inFlight writers.
func runFsync(ctx context.Context, cfg *config, inFlight int) (*Report, error) {
	f, err := os.CreateTemp(cfg.dir, "meshload-fsync-*")
	if err != nil {
		return nil, fmt.Errorf("-dir: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	for off := int64(0); off < fsyncFileSize; off += int64(len(page)) {
		if _, err := f.WriteAt(page, off); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	p := plan{concurrency: 1, duration: cfg.duration, warmup: cfg.warmup}
	r := runLoad(ctx, p, func(int) opFunc {
		return func(_ context.Context, i int) outcome {
			page[0] = byte(i)
			off := int64(i) * int64(len(page)) % fsyncFileSize
			if _, err := f.WriteAt(page, off); err != nil {
				return outcome{key: "error: write"}
			}
			if err := fdatasync(f); err != nil {
				return outcome{key: "error: fdatasync"}
			}
			return outcome{key: "ok", ok: true}
		}
	})
	r.Mode, r.Target = "fsync", fmt.Sprintf("fdatasync after a 4 KiB write, file in %s", cfg.dir)
	if r.Latency.P50 > 0 {
		r.DiskLimit = &DiskLimit{InFlight: inFlight, PerSecond: round2(float64(inFlight) / (r.Latency.P50 / 1e3))}
	}
	return r, nil
}
