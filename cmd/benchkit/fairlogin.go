package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// fairLogin measures how much a one-address login flood slows another address's logins: the p99
// of sign-ins from the address from (email, password) without a flood, then while flood
// connections from the address floodFrom post logins with a new email each (wrong passwords, every
// one a hash), and prints "<p99 calm ms> <p99 flooded ms> <ratio>". Both addresses are loopback
// addresses the client binds to, so the service sees two socket peers. It returns once the service
// has served the flood's last login.
func fairLogin(base, from, floodFrom, email, password string, conns int, d time.Duration) {
	second := clientFrom(from, 4)
	calm := logins(second, base, email, password, d)
	ctx, stop := context.WithCancel(context.Background())
	flooder := clientFrom(floodFrom, conns)
	var wg sync.WaitGroup
	var n atomic.Int64
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_ = login(ctx, flooder, base, fmt.Sprintf("flood-%d@example.test", n.Add(1)), "wrong-password-x")
			}
		}()
	}
	time.Sleep(time.Second) // the flood fills the queue
	flooded := logins(second, base, email, password, d)
	stop()
	wg.Wait()
	// The service may still be working through the flood's queue: one more login from the flooding
	// address ends after the flood's own (its hashes wait in order), so the next run starts calm.
	_ = login(context.Background(), flooder, base, "drain@example.test", "wrong-password-x")
	c, f := p99(calm), p99(flooded)
	fmt.Printf("%.1f %.1f %.2f\n", ms(c), ms(f), ms(f)/ms(c))
}

// clientFrom is an HTTP client whose connections leave from the address addr.
func clientFrom(addr string, conns int) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dialer.DialContext,
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// logins signs in one request after another for d; each must succeed. It returns the latencies.
func logins(c *http.Client, base, email, password string, d time.Duration) []time.Duration {
	var out []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if status := login(context.Background(), c, base, email, password); status != http.StatusOK {
			log.Fatalf("a sign-in of the measured address answered %d", status)
		}
		out = append(out, time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

func login(ctx context.Context, c *http.Client, base, email, password string) int {
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/auth/login", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func p99(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, len(d)*99/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
