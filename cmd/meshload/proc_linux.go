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
