// Command benchkit holds the baselines scripts/bench.sh measures the service against, in the same
// run on the same machine, and its load helpers: baseline (a bare Fiber JSON handler), upstream
// (a fake OpenAI-compatible upstream), proxy (a bare fasthttp relay: the floor of a gateway's
// added latency), hash (one argon2id hash), limiter (one rate-limit check), fairlogin (logins of
// one address during another's flood), seed (COPY users and databases), streams (open streaming
// generations) and tokens (access tokens for seeded users). `benchkit -h` lists their flags.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"provisioner/platform/authn"
	"provisioner/platform/ratelimit"
	"provisioner/platform/secrets"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: benchkit baseline|upstream|proxy|hash|limiter|fairlogin")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:7001", "listen address")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	upstream := fs.String("upstream", "http://127.0.0.1:7002/chat/completions", "proxy: the URL relayed to")
	rate := fs.String("rate", "1000000000-M", "limiter: the rate measured")
	base := fs.String("base", "http://127.0.0.1:5133", "fairlogin: the service")
	email := fs.String("email", "", "fairlogin: the measured address's account")
	password := fs.String("password", "", "fairlogin: its password")
	from := fs.String("from", "127.0.0.1", "fairlogin: the measured address")
	floodFrom := fs.String("flood-from", "127.0.0.2", "fairlogin: the flooding address")
	conns := fs.Int("conns", 64, "fairlogin: the flood's connections")
	duration := fs.Duration("duration", 5*time.Second, "fairlogin: each measurement's length")
	dsn := fs.String("dsn", "", "seed: the control database")
	n := fs.Int("n", 1_000_000, "seed, tokens: users")
	key := fs.String("key", "", "tokens: the service's Jwt:Key; streams: the AI key")
	url := fs.String("url", "", "streams: the gateway's chat completions URL")
	hold := fs.Duration("hold", 10*time.Second, "streams: how long they stay open")
	issuer := fs.String("issuer", "", "tokens: the service's Jwt:Issuer")
	audience := fs.String("audience", "", "tokens: the service's Jwt:Audience")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "baseline":
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Get("/", func(c *fiber.Ctx) error {
			return c.JSON(fiber.Map{"success": true, "message": "OK", "data": []fiber.Map{{"id": 1, "name": "db"}}})
		})
		log.Fatal(app.Listen(*addr))
	case "upstream":
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Post("/chat/completions", func(c *fiber.Ctx) error {
			if bytes.Contains(c.Body(), []byte(`"stream":true`)) {
				return streamAnswer(c)
			}
			c.Set("Content-Type", "application/json")
			return c.SendString(`{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`)
		})
		log.Fatal(app.Listen(*addr))
	case "proxy":
		client := &fasthttp.Client{MaxConnsPerHost: 512}
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Post("/gen", func(c *fiber.Ctx) error {
			req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(res)
			req.SetRequestURI(*upstream)
			req.Header.SetMethod(fiber.MethodPost)
			req.Header.SetContentType(fiber.MIMEApplicationJSON)
			req.SetBody(c.Body())
			if err := client.Do(req, res); err != nil {
				return err
			}
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(res.Body())
		})
		log.Fatal(app.Listen(*addr))
	case "hash":
		h := secrets.NewHasher(1)
		var d []time.Duration
		for i := 0; i < 15; i++ {
			start := time.Now()
			if _, err := h.Hash(context.Background(), "benchmark-password"); err != nil {
				log.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		fmt.Printf("%.3f\n", float64(median(d).Microseconds())/1000)
	case "limiter":
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			log.Fatal(err)
		}
		rc := redis.NewClient(opts)
		l, err := ratelimit.New(ratelimit.Options{Redis: rc, Prefix: fmt.Sprintf("benchkit%d", time.Now().UnixNano()),
			Rates: map[string]string{"B": *rate}})
		if err != nil {
			log.Fatal(err)
		}
		ctx := context.Background()
		for i := 0; i < 200; i++ {
			_, _ = l.Take(ctx, "B", "warm")
		}
		var d []time.Duration
		for i := 0; i < 5000; i++ {
			start := time.Now()
			if _, err := l.Take(ctx, "B", "k"); err != nil {
				log.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		fmt.Printf("%.1f\n", float64(median(d).Nanoseconds())/1000)
	case "fairlogin":
		fairLogin(*base, *from, *floodFrom, *email, *password, *conns, *duration)
	case "seed":
		seed(*dsn, *n)
	case "streams":
		streams(*url, *key, *n, *hold)
	case "tokens":
		tokens(*dsn, *n, authn.Options{Key: []byte(*key), Issuer: *issuer, Audience: *audience, Expiry: time.Hour})
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
