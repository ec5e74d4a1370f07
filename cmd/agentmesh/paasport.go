package main

import (
	"flag"
	"fmt"
	"strconv"
)

// applyPORT makes serve listen on $PORT, the variable PaaS platforms
// (Cloud Run, Heroku, Render, Fly.io, App Engine…) set to the port they
// route to, when no listen address was chosen: neither --addr nor --port
// on the command line, nor MESH_ADDR or MESH_PORT. The host part of the
// default --addr (all interfaces) is kept. A PORT that is not a port is a
// usage error naming the variable; when it is not used, it is not read.
func applyPORT(cfg *serveConfig, f *flags, env func(string) string) error {
	v := env("PORT")
	if v == "" || env("MESH_ADDR") != "" || env("MESH_PORT") != "" {
		return nil
	}
	chosen := false
	f.fs.Visit(func(fl *flag.Flag) { chosen = chosen || fl.Name == "addr" || fl.Name == "port" })
	if chosen {
		return nil
	}
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("environment variable PORT: %q is not a port number (1-65535)", v)
	}
	cfg.port = port
	return nil
}
