// Command rawfloor is a measuring stick for the noisy-neighbour benchmark
// (bench/noisy.sh RAW=1; docs/benchmarks.md, "Noisy neighbour"): the least a
// Go program can spend to answer an HTTP/1.1 call on this machine. It answers
// every call on a keep-alive connection with the same fixed 429, without
// parsing the call (it finds where the call ends, and nothing else), without
// allocating per call, with one read and one write system call per call: what
// is left is the kernel's loopback TCP and Go's network poller. It is not an
// HTTP server: never put it in front of anything.
//
//	go run ./bench/cmd/rawfloor -addr 127.0.0.1:18083
package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"strconv"
)

var answer = []byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\n{}")

func main() {
	addr := flag.String("addr", "127.0.0.1:18083", "`host:port` to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c)
	}
}

// serve answers each call on c until the peer closes it or sends a call
// larger than the buffer.
func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16<<10)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		if err != nil {
			if !errors.Is(err, io.EOF) {
				log.Print(err)
			}
			return
		}
		n += m
		for {
			end := callEnd(buf[:n])
			if end < 0 {
				break
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
			n = copy(buf, buf[end:n])
		}
		if n == len(buf) {
			log.Print("a call larger than the buffer; closing")
			return
		}
	}
}

// callEnd is the length of the first whole call in b (its header and its
// Content-Length's body), or -1 while it is incomplete.
func callEnd(b []byte) int {
	h := bytes.Index(b, []byte("\r\n\r\n"))
	if h < 0 {
		return -1
	}
	end := h + 4
	for line := range bytes.SplitSeq(b[:h], []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(name, []byte("Content-Length")) {
			l, err := strconv.Atoi(string(bytes.TrimSpace(value)))
			if err != nil || l < 0 {
				return -1
			}
			end += l
		}
	}
	if end > len(b) {
		return -1
	}
	return end
}
