// goronet: the Go side of bench/net_run.sh (standard library only).
//
//	goronet echo-server ADDR          echo every byte back (a goroutine per connection)
//	goronet http-server ADDR          net/http: "/" Hello, World!; "/heavy" computeHeavyTask
//	goronet raw-server ADDR           a minimal HTTP/1.1 responder on raw TCP (keep-alive,
//	                                  pipelining), the floor for an HTTP server in Go
//	goronet echo-client ADDR CONNS SECONDS
//	                                  CONNS connections each doing 512-byte write + read-full
//	                                  round trips for SECONDS; prints round trips/s and latency
//	goronet http-client ADDR CONNS SECONDS HEAVY_PERCENT
//	                                  keep-alive GETs, HEAVY_PERCENT of them /heavy; prints
//	                                  requests/s and light/heavy latency percentiles
//	goronet idle-client ADDR CONNS HOLD_SECONDS
//	                                  CONNS keep-alive connections, one request each, then idle
//
// Servers print "listening ADDR" once ready. Clients print RESULT lines.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

func computeHeavyTask() int {
	result := 0
	for i := 0; i < 10000000; i++ {
		result += i
	}
	return result
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "goronet:", err)
	os.Exit(1)
}

func listen(addr string) net.Listener {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		die(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	return ln
}

func echoServer(addr string) {
	ln := listen(addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			die(err)
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}(c)
	}
}

func httpServer(addr string) {
	ln := listen(addr)
	mux := http.NewServeMux()
	mux.HandleFunc("/heavy", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Heavy task result: %d", computeHeavyTask())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Hello, World!")
	})
	die(http.Serve(ln, mux))
}

var rawResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, World!")

func rawServer(addr string) {
	ln := listen(addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			die(err)
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 16384)
			var pending []byte
			out := make([]byte, 0, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					pending = append(pending, buf[:n]...)
					out = out[:0]
					for {
						i := bytes.Index(pending, []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						pending = pending[i+4:]
						out = append(out, rawResponse...)
					}
					if len(out) > 0 {
						if _, werr := c.Write(out); werr != nil {
							return
						}
					}
				}
				if err != nil {
					return
				}
			}
		}(c)
	}
}

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	i := int(q * float64(len(v)))
	if i >= len(v) {
		i = len(v) - 1
	}
	return v[i]
}

func report(name string, lat []float64, seconds float64) {
	sort.Float64s(lat)
	fmt.Printf("RESULT %s_rate %.0f\n", name, float64(len(lat))/seconds)
	fmt.Printf("RESULT %s_p50_us %.1f\n", name, pct(lat, 0.50))
	fmt.Printf("RESULT %s_p99_us %.1f\n", name, pct(lat, 0.99))
}

func echoClient(addr string, conns int, seconds float64) {
	var mu sync.Mutex
	var all []float64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				die(err)
			}
			defer c.Close()
			out := make([]byte, 512)
			in := make([]byte, 512)
			for k := range out {
				out[k] = byte(i + k)
			}
			var lat []float64
			for time.Now().Before(stop) {
				t0 := time.Now()
				if _, err := c.Write(out); err != nil {
					die(err)
				}
				if _, err := io.ReadFull(c, in); err != nil {
					die(err)
				}
				lat = append(lat, float64(time.Since(t0).Nanoseconds())/1000)
				if !bytes.Equal(in, out) {
					die(fmt.Errorf("echo mismatch"))
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	report("echo", all, seconds)
}

func readResponse(r *bufio.Reader) (int, error) {
	status := 0
	length := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if status == 0 {
			if len(line) < 12 {
				return 0, fmt.Errorf("bad status line %q", line)
			}
			status, _ = strconv.Atoi(line[9:12])
			continue
		}
		if line == "\r\n" {
			break
		}
		if len(line) > 16 && (line[:16] == "Content-Length: " || line[:16] == "content-length: ") {
			length, _ = strconv.Atoi(line[16 : len(line)-2])
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("no Content-Length")
	}
	if _, err := io.CopyN(io.Discard, r, int64(length)); err != nil {
		return 0, err
	}
	return status, nil
}

func httpClient(addr string, conns int, seconds float64, heavyPct int) {
	var mu sync.Mutex
	var light, heavy []float64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				die(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			rnd := uint32(2654435761) * uint32(i+1)
			var l, h []float64
			for time.Now().Before(stop) {
				rnd = rnd*1664525 + 1013904223
				isHeavy := int((rnd>>8)%100) < heavyPct
				req := "GET / HTTP/1.1\r\nHost: bench\r\n\r\n"
				if isHeavy {
					req = "GET /heavy HTTP/1.1\r\nHost: bench\r\n\r\n"
				}
				t0 := time.Now()
				if _, err := c.Write([]byte(req)); err != nil {
					die(err)
				}
				st, err := readResponse(r)
				if err != nil || st != 200 {
					die(fmt.Errorf("bad response %d %v", st, err))
				}
				us := float64(time.Since(t0).Nanoseconds()) / 1000
				if isHeavy {
					h = append(h, us)
				} else {
					l = append(l, us)
				}
			}
			mu.Lock()
			light = append(light, l...)
			heavy = append(heavy, h...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	fmt.Printf("RESULT http_rate %.0f\n", float64(len(light)+len(heavy))/seconds)
	report("light", light, seconds)
	report("heavy", heavy, seconds)
}

func idleClient(addr string, conns int, hold float64) {
	var cs []net.Conn
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			die(err)
		}
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")); err != nil {
			die(err)
		}
		if st, err := readResponse(bufio.NewReader(c)); err != nil || st != 200 {
			die(fmt.Errorf("bad response %d %v", st, err))
		}
		cs = append(cs, c)
	}
	fmt.Printf("RESULT idle_conns %d\n", len(cs))
	os.Stdout.Sync()
	time.Sleep(time.Duration(hold * float64(time.Second)))
	for _, c := range cs {
		c.Close()
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		die(err)
	}
	return n
}

func atof(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		die(err)
	}
	return f
}

func main() {
	if len(os.Args) < 3 {
		die(fmt.Errorf("usage: see main.go"))
	}
	a := os.Args
	switch a[1] {
	case "echo-server":
		echoServer(a[2])
	case "http-server":
		httpServer(a[2])
	case "raw-server":
		rawServer(a[2])
	case "echo-client":
		echoClient(a[2], atoi(a[3]), atof(a[4]))
	case "http-client":
		httpClient(a[2], atoi(a[3]), atof(a[4]), atoi(a[5]))
	case "idle-client":
		idleClient(a[2], atoi(a[3]), atof(a[4]))
	default:
		die(fmt.Errorf("unknown mode %s", a[1]))
	}
}
