package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// processCPU returns the CPU time (user + system) process pid has used, from
// /proc/PID/stat.
func processCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted from the last ')'. utime and stime are fields 14
	// and 15, in clock ticks of 1/100 s (USER_HZ on every Linux port Go
	// supports).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// processRSS returns the resident set size of process pid in bytes, and
// its anonymous part (the heap and stacks, without the pages of mapped
// files such as a bbolt store), from /proc/PID/status.
func processRSS(pid int) (rss, anon uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	kib := func(key string) (uint64, bool) {
		for line := range bytes.Lines(data) {
			rest, found := bytes.CutPrefix(line, []byte(key))
			if !found {
				continue
			}
			f := bytes.Fields(rest) // "123456 kB"
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, false
			}
			v, err := strconv.ParseUint(string(f[0]), 10, 64)
			return v << 10, err == nil
		}
		return 0, false
	}
	rss, ok = kib("VmRSS:")
	anon, _ = kib("RssAnon:")
	return rss, anon, ok
}

// processFDs returns the number of open file descriptors of process pid,
// the entries of /proc/PID/fd.
func processFDs(pid int) (int, bool) {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, false
	}
	return len(entries), true
}
