package aikeys

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

// encodingJSON writes v as huma's JSON format does (encoding/json, HTML not escaped, a newline).
func encodingJSON(t testing.TB, v any) []byte {
	var b bytes.Buffer
	require.NoError(t, huma.DefaultJSONFormat.Marshal(&b, v))
	return b.Bytes()
}

// oldChatRequest is the upstream request as it was built before it was written by hand.
func oldChatRequest(model, user string, in GenerateInput) any {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model       string    `json:"model"`
		Messages    []message `json:"messages"`
		MaxTokens   *int      `json:"max_tokens,omitempty"`
		Temperature *float64  `json:"temperature,omitempty"`
		User        string    `json:"user,omitempty"`
	}{Model: model, MaxTokens: in.MaxTokens, Temperature: in.Temperature, User: user}
	if in.System != "" {
		req.Messages = append(req.Messages, message{Role: "system", Content: in.System})
	}
	req.Messages = append(req.Messages, message{Role: "user", Content: in.Prompt})
	return req
}

// checkHandWritten holds both hand-written documents to encoding/json's bytes for these values.
func checkHandWritten(t testing.TB, s1, s2, s3 string, n int64, f float64) {
	g := &Generation{Text: s1, Model: s2, FinishReason: s3, Usage: TokenUsage{PromptTokens: n, CompletionTokens: n / 3, TotalTokens: n + n/3}}
	want := encodingJSON(t, httpx.OK("OK", *g).Body)
	if got := appendGenerationEnvelope(nil, g); !bytes.Equal(got, want) {
		t.Fatalf("envelope:\n got %q\nwant %q", got, want)
	}
	mt := int(n % 70000)
	for _, in := range []GenerateInput{
		{Prompt: s1},
		{Prompt: s1, System: s3, MaxTokens: &mt, Temperature: &f},
		{Prompt: s3, System: s1, Temperature: &f},
	} {
		for _, user := range []string{"", "42", s3} {
			want := bytes.TrimSuffix(encodingJSON(t, oldChatRequest(s2, user, in)), []byte("\n"))
			if got := appendChatRequest(nil, s2, user, in); !bytes.Equal(got, want) {
				t.Fatalf("chat request:\n got %q\nwant %q", got, want)
			}
		}
	}
}

func TestHandWrittenJSONIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	var controls []byte
	for b := 0; b < 0x20; b++ {
		controls = append(controls, byte(b))
	}
	strs := []string{
		"", "Hello there", `"quoted" and \back\slashed`, string(controls), "\x7f", "<script>&amp;</script>",
		"\u2028 and \u2029", "héllo 世界 🎉", "\xff\xfe invalid \xc3", "a\xe2\x80", "\xed\xa0\x80 surrogate", "\u00e9\u0301",
	}
	floats := []float64{0, 0.7, 1, 2, 1e-7, 1.5e-6, 0.1 + 0.2, math.SmallestNonzeroFloat64, 1e-10}
	for i, s := range strs {
		checkHandWritten(t, s, strs[(i+1)%len(strs)], strs[(i+2)%len(strs)], int64(i*1000003), floats[i%len(floats)])
	}
	checkHandWritten(t, "x", "y", "z", math.MaxInt64/2, 2)
	assert.True(t, json.Valid(appendChatRequest(nil, "m", "1", GenerateInput{Prompt: "\xff"})))
}

func FuzzHandWrittenJSON(f *testing.F) {
	f.Add("Hello", "fake-model", "stop", int64(13), 0.7)
	f.Add("\u2028<&>\x00\xff", "m\"", "\\", int64(0), 1e-7)
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, n int64, fl float64) {
		if math.IsNaN(fl) || math.IsInf(fl, 0) || n < 0 {
			return // the schema bounds temperature; usage figures are clamped to [0, 1e9]
		}
		checkHandWritten(t, s1, s2, s3, n, fl)
	})
}
