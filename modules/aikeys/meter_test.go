package aikeys_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
)

// keyUsage answers the usage of the key id among token's keys.
func keyUsage(t *testing.T, a *apptest.App, token string, id int64) keyView {
	t.Helper()
	var ks []keyView
	a.Get("/api/me/ai-keys", token).Decode(t, &ks)
	for _, k := range ks {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("key %d not listed", id)
	return keyView{}
}

// maxUsageAnswer is a 200 whose usage figures are int64's maximum.
const maxUsageAnswer = `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":1}}`

// TestPoisonedUsageNeverStopsMetering: an upstream 200 with "prompt_tokens": 9223372036854775807
// on a key whose stored usage was above 0 made the meter's one UPDATE fail with "bigint out of
// range" every second; the whole batch was kept for the next flush, forever, so no key's usage was
// written any more. The figure is capped, the sums cannot overflow, and the other keys are written.
func TestPoisonedUsageNeverStopsMetering(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	ka := newKey(t, a, u.Token, nil)
	kb := newKey(t, a, u.Token, map[string]any{"name": "second"})
	require.Equal(t, http.StatusOK, generate(a, ka.Key).Status)
	require.Eventually(t, func() bool { return keyUsage(t, a, u.Token, ka.ID).Usage.PromptTokens == 11 },
		5*time.Second, 100*time.Millisecond)

	up.Set(func(b *aikeystest.Behaviour) { b.OKBody = maxUsageAnswer })
	res, body := chatRaw(t, a, ka.Key, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	up.Set(func(b *aikeystest.Behaviour) { b.OKBody = "" })
	require.Equal(t, http.StatusOK, generate(a, kb.Key).Status)

	require.Eventually(t, func() bool { return keyUsage(t, a, u.Token, kb.ID).Usage.Requests == 1 },
		5*time.Second, 100*time.Millisecond, "the other key's usage is written")
	got := keyUsage(t, a, u.Token, ka.ID)
	assert.EqualValues(t, 2, got.Usage.Requests)
	assert.EqualValues(t, 11+1_000_000_000, got.Usage.PromptTokens, "capped at 1e9 per answer, not wrapped")
	assert.EqualValues(t, 2+1_000_000_000, got.Usage.CompletionTokens, "capped at 1e9 per answer, not wrapped")
}

// TestOneRefusedUsageEntryDoesNotBlockTheOthers: when the database refuses one key's figures as
// data (here a trigger raising SQLSTATE 22003, numeric out of range), that entry is dropped
// (logged) and every other key's usage in the same batch is still written.
func TestOneRefusedUsageEntryDoesNotBlockTheOthers(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	ka := newKey(t, a, u.Token, nil)
	kb := newKey(t, a, u.Token, map[string]any{"name": "second"})
	fn := fmt.Sprintf("refuse_usage_%d", ka.ID)
	_, err := a.DB.Exec(fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.id = %d AND NEW.requests > OLD.requests THEN
		RAISE EXCEPTION 'refused for the test' USING ERRCODE = '22003';
	END IF;
	RETURN NEW;
END $$`, fn, ka.ID))
	require.NoError(t, err)
	_, err = a.DB.Exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE UPDATE ON ai_keys FOR EACH ROW EXECUTE FUNCTION %s()`, fn, fn))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = a.DB.Exec(fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON ai_keys`, fn))
		_, _ = a.DB.Exec(fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, fn))
	})

	require.Equal(t, http.StatusOK, generate(a, ka.Key).Status)
	require.Equal(t, http.StatusOK, generate(a, kb.Key).Status)
	require.Eventually(t, func() bool { return keyUsage(t, a, u.Token, kb.ID).Usage.Requests == 1 },
		5*time.Second, 100*time.Millisecond, "the other key's usage is written")
	assert.EqualValues(t, 0, keyUsage(t, a, u.Token, ka.ID).Usage.Requests)
}

// TestUsageOfCallsInFlightAtShutdownIsKept: at shutdown the server waits for the generations in
// flight (a generate call, a stream) and answers them; their usage is written too. The meter
// stopped, with its last flush, before the server had drained, so what those calls added stayed
// in memory and was lost on every deployment.
func TestUsageOfCallsInFlightAtShutdownIsKept(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.Delay = 1500 * time.Millisecond })
	var wg sync.WaitGroup
	wg.Add(2)
	var genStatus, streamStatus int
	var streamBodyText string
	go func() {
		defer wg.Done()
		genStatus = generate(a, k.Key).Status
	}()
	go func() {
		defer wg.Done()
		res, body := chatRaw(t, a, k.Key, streamBody(nil))
		streamStatus, streamBodyText = res.StatusCode, body
	}()
	require.Eventually(t, func() bool {
		return up.Served() == 2
	}, 5*time.Second, 10*time.Millisecond, "both calls reached the upstream")
	a.Stop() // as a SIGTERM: the server waits for both
	wg.Wait()
	require.Equal(t, http.StatusOK, genStatus)
	require.Equal(t, http.StatusOK, streamStatus, streamBodyText)
	require.Contains(t, streamBodyText, "[DONE]")

	after := apptest.Start(t) // the same control database
	var requests, prompt, completion int64
	require.NoError(t, after.DB.QueryRow("SELECT requests, prompt_tokens, completion_tokens FROM ai_keys WHERE id = ?", k.ID).
		Scan(&requests, &prompt, &completion))
	assert.EqualValues(t, 2, requests, "both calls answered during the shutdown are counted")
	assert.EqualValues(t, 11+7, prompt)
	assert.EqualValues(t, 2+2, completion)
}
