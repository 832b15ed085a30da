package aikeys

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"provisioner/platform/ratelimit"
)

// relayStream relays a streamed answer event by event. Ai:TimeoutSeconds bounds every wait for
// the upstream (for its answer to begin, then between two reads), not the whole stream: a long
// answer that keeps coming is relayed to its end. A stream the upstream stops sending (for that
// long) or breaks off ends with an OpenAI error event, so SDKs raise instead of taking a cut
// answer for a whole one. Our Ai:ApiKey is redacted from every line relayed.
// held is settled to the stream's usage when it ends, however it ends, or released when no
// stream began.
func (p *Passthrough) relayStream(c *fiber.Ctx, keyID int64, held *hold, raw []byte, promptEstimate int64, wantUsage bool) error {
	timeout := p.upstream.timeout
	uctx, cancel := context.WithCancel(context.Background())
	var timedOut atomic.Bool
	idle := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	// Until the upstream's answer begins nothing is written to the client: a client that gives
	// up meanwhile is noticed by watching its connection (after clientCheckDelay), and the
	// upstream request is cancelled.
	var left atomic.Bool
	stopWatch := watchClient(c, func() { left.Store(true); cancel() })
	res, err := p.upstream.post(uctx, raw)
	stopWatch()
	if err != nil {
		held.release()
	}
	if err != nil && left.Load() {
		idle.Stop()
		p.clientLeft(keyID)
		return openAIError(c, http.StatusBadGateway, "server_error", "client_gone", "", "The client left before the AI upstream answered")
	}
	if err != nil {
		idle.Stop()
		cancel()
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_unavailable", "", "The AI upstream did not answer")
	}
	if res.StatusCode != http.StatusOK {
		// Refused before streaming began: answered as a non-streamed answer is (sendAnswer).
		defer cancel()
		defer idle.Stop()
		defer res.Body.Close()
		// The timeout bounds each wait here too, not the whole read of a large error body.
		data, err := io.ReadAll(io.LimitReader(&idleReader{r: res.Body, t: idle, d: timeout}, maxAnswer+1))
		if err != nil || len(data) > maxAnswer {
			held.release()
		}
		if err != nil {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_cut", "", "The AI upstream's answer was cut")
		}
		if len(data) > maxAnswer {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_too_large", "", "The AI upstream's answer was too large")
		}
		return p.sendAnswer(c, keyID, held, answer{status: res.StatusCode, contentType: res.Header.Get("Content-Type"),
			retryAfter: res.Header.Get(fiber.HeaderRetryAfter), body: data})
	}

	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		// A 200 that is not a stream (a server that ignores `stream`, a proxy's page): an SDK
		// reading events would find none and take it for an empty answer. Not relayed, not metered.
		idle.Stop()
		cancel()
		_ = res.Body.Close()
		held.release()
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_not_streaming", "", "The AI upstream answered without a stream")
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store") // as every answer; SSE needs no more
	c.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		defer idle.Stop()
		defer res.Body.Close()
		var prompt, completion, deltas int64
		metered, done := false, false
		var gone atomic.Bool // the client went away: a write or flush to it failed
		// mu guards w, pending and wrote between the relay and the keep-alive.
		var mu sync.Mutex
		pending := false   // a line of an event not yet ended is written
		skipBlank := false // the event being skipped ends at the next blank line
		wrote := time.Now()
		// While the upstream is silent nothing is written, so nothing would notice a client
		// that left: every streamKeepAlive without a write, an SSE comment (ignored by SSE
		// clients and the OpenAI SDKs) is sent; when it cannot be, the upstream request is
		// cancelled at once instead of generating for nobody until Ai:TimeoutSeconds.
		every := time.Duration(streamKeepAlive.Load())
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				mu.Lock()
				if !pending && time.Since(wrote) >= every-every/10 {
					_, _ = w.WriteString(": keep-alive\n\n")
					wrote = time.Now()
					if w.Flush() != nil {
						gone.Store(true)
						mu.Unlock()
						cancel()
						return
					}
				}
				mu.Unlock()
			}
		}()
		sc := bufio.NewScanner(&idleReader{r: res.Body, t: idle, d: timeout})
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if skipBlank {
				skipBlank = len(line) != 0
				continue
			}
			if data, ok := sseData(line); ok {
				if bytes.Equal(data, []byte("[DONE]")) {
					done = true
				} else {
					var cr chatResponse
					var te *json.UnmarshalTypeError
					if err := json.Unmarshal(data, &cr); err == nil || errors.As(err, &te) { // a field of another type is skipped
						for _, ch := range cr.Choices {
							if ch.Delta.Content != "" {
								deltas++
							}
						}
						if cr.Usage != nil {
							prompt, completion, metered = int64(cr.Usage.PromptTokens), int64(cr.Usage.CompletionTokens), true
							if !wantUsage {
								if len(cr.Choices) == 0 {
									// The usage-only chunk we asked for, not the client: metered, not relayed.
									skipBlank = true
									continue
								}
								// Usage on a content chunk (some servers do that): the chunk without it.
								line = withoutUsage(line, data)
							}
						}
					}
				}
			}
			// Any line may quote our Ai:ApiKey (an error event quoting the Authorization it
			// got): redacted, as it is or JSON-escaped. A line is whole here, however the
			// upstream's writes cut it, and the key (an HTTP header's value) has no line break.
			mu.Lock()
			_, _ = w.Write(p.upstream.secret.Redact(line))
			err := w.WriteByte('\n')
			pending = len(line) != 0
			if !pending && err == nil { // end of one event: send it now
				err = w.Flush()
				wrote = time.Now()
			}
			mu.Unlock()
			if err != nil || gone.Load() { // the client went away (bufio's errors stick)
				gone.Store(true)
				cancel()
				break
			}
		}
		close(stop) // no keep-alive after the end
		<-stopped
		if err := sc.Err(); err != nil && !gone.Load() && !done {
			code, msg := "upstream_cut", "The AI upstream's stream broke off"
			switch {
			case timedOut.Load():
				code, msg = "upstream_timeout", fmt.Sprintf("The AI upstream sent nothing for %s", timeout)
			case errors.Is(err, bufio.ErrTooLong):
				code, msg = "upstream_too_large", "The AI upstream sent a line over 4 MiB"
			}
			if p.log != nil {
				p.log.Warn("AI stream cut", "keyId", keyID, "code", code, "error", err.Error())
			}
			if pending {
				_ = w.WriteByte('\n')
			}
			ev, _ := json.Marshal(openAIErrorBody("server_error", code, "", msg))
			_, _ = w.WriteString("data: ")
			_, _ = w.Write(ev)
			_, _ = w.WriteString("\n\n")
		}
		_ = w.Flush()
		if !metered {
			// Disconnected, cancelled (or no usage chunk): charge what the upstream generated
			// up to then, estimating one token per content delta read and the prompt from its size.
			prompt, completion = promptEstimate, deltas
		}
		held.settle(prompt + completion)
		p.meter.Add(keyID, prompt, completion)
	})
	return nil
}

// dropLimitHeaders takes our rate-limit headers (ratelimit.WriteHeaders') off the answer.
func dropLimitHeaders(c *fiber.Ctx) {
	for _, h := range ratelimit.HeaderNames {
		c.Response().Header.Del(h)
	}
}

// streamKeepAlive is how long a stream may go without a write to the client before an SSE
// comment is sent to find out whether the client is still there (in nanoseconds; tests shorten it).
var streamKeepAlive atomic.Int64

func init() { streamKeepAlive.Store(int64(5 * time.Second)) }

// sseData answers the value of a server-sent event's data line: what follows "data:" and the one
// space the SSE format allows there, which some OpenAI-compatible servers do not write ("data:{…}").
func sseData(line []byte) ([]byte, bool) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if ok {
		data = bytes.TrimPrefix(data, []byte(" "))
	}
	return data, ok
}

// withoutUsage returns the event line "data: <data>" with the chunk's usage member removed, or
// line itself when data cannot be rewritten.
func withoutUsage(line, data []byte) []byte {
	var chunk map[string]json.RawMessage
	if json.Unmarshal(data, &chunk) != nil {
		return line
	}
	delete(chunk, "usage")
	out, err := json.Marshal(chunk)
	if err != nil {
		return line
	}
	return append([]byte("data: "), out...)
}

// idleReader arms t for d around every read of r: a read that waits longer fires it (which cancels
// the upstream request). Time spent writing to a slow client does not count.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.t.Reset(r.d)
	n, err := r.r.Read(b)
	r.t.Stop()
	return n, err
}

// clientLeft logs a call abandoned because its client left before the upstream answered.
func (p *Passthrough) clientLeft(keyID int64) {
	if p.log != nil {
		p.log.Info("AI call cancelled: the client left before the upstream answered", "keyId", keyID)
	}
}
