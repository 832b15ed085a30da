package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// streamAnswer answers a chat completion asked with "stream": true as a text/event-stream: one
// chunk every 200 ms for 30 s, then the usage chunk and [DONE] (or until the client goes).
func streamAnswer(c *fiber.Ctx) error {
	c.Set("Content-Type", "text/event-stream")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		for i := 0; i < 150; i++ {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n", i)
			if w.Flush() != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"fake-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":150,\"total_tokens\":161}}\n\ndata: [DONE]\n\n")
		_ = w.Flush()
	})
	return nil
}

// streams opens n streaming generations at url (the gateway's chat completions, key as Bearer),
// prints "open" once every one has sent its first chunk, keeps reading them for hold, then exits.
func streams(url, key string, n int, hold time.Duration) {
	body := `{"model":"fake","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}}
	var opened sync.WaitGroup
	opened.Add(n)
	deadline := time.Now().Add(hold)
	for i := 0; i < n; i++ {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			res, err := client.Do(req)
			if err != nil {
				log.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				log.Fatalf("stream: %d", res.StatusCode)
			}
			sc := bufio.NewScanner(res.Body)
			first := true
			for sc.Scan() && time.Now().Before(deadline) {
				if first && bytes.HasPrefix(sc.Bytes(), []byte("data:")) {
					first = false
					opened.Done()
				}
			}
		}()
	}
	opened.Wait()
	fmt.Println("open")
	time.Sleep(time.Until(deadline))
}
