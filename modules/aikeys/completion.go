package aikeys

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// GenerateInput is the body of POST /api/ai/generate.
type GenerateInput struct {
	Prompt      string   `json:"prompt" minLength:"1" maxLength:"200000"`
	System      string   `json:"system,omitempty" maxLength:"100000"`
	Model       string   `json:"model,omitempty" maxLength:"200" doc:"Default: Ai:DefaultModel."`
	MaxTokens   *int     `json:"maxTokens,omitempty" minimum:"1" maximum:"65536"`
	Temperature *float64 `json:"temperature,omitempty" minimum:"0" maximum:"2"`
}

// TokenUsage is what one generation consumed.
type TokenUsage struct {
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
	TotalTokens      int64 `json:"totalTokens"`
}

// Generation is the data of POST /api/ai/generate.
type Generation struct {
	Text         string     `json:"text"`
	Model        string     `json:"model"`
	FinishReason string     `json:"finishReason" example:"stop"`
	Usage        TokenUsage `json:"usage"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageFigures `json:"usage"`
}

// maxAnswerTokens bounds each usage figure of one answer (prompt, completion, total): an upstream
// reporting more (or a negative figure) is not believed as it stands, on either route.
const maxAnswerTokens = 1_000_000_000

// tokenCount is one usage figure as the upstream reported it, sanitised as it is read: an integer
// or an integral float (5.0, 1e3) counts, clamped to [0, maxAnswerTokens]; anything else (a
// string, a fraction, null) is 0. It never fails to decode, so a bad figure never makes an answer
// malformed.
type tokenCount int64

// UnmarshalJSON reads a figure; see tokenCount.
func (n *tokenCount) UnmarshalJSON(b []byte) error {
	*n = 0
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = tokenCount(min(max(v, 0), maxAnswerTokens))
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil && f == math.Trunc(f) {
		*n = tokenCount(min(max(f, 0), maxAnswerTokens))
	}
	return nil
}

// usageFigures is an answer's usage, each figure sanitised (tokenCount). A usage member that is no
// object (a string, an array) reads as zeros rather than failing the answer.
type usageFigures struct {
	PromptTokens     tokenCount `json:"prompt_tokens"`
	CompletionTokens tokenCount `json:"completion_tokens"`
	TotalTokens      tokenCount `json:"total_tokens"`
}

// UnmarshalJSON reads the figures of an object and zeros for anything else.
func (u *usageFigures) UnmarshalJSON(b []byte) error {
	*u = usageFigures{}
	if len(b) > 0 && b[0] == '{' {
		type plain usageFigures // without this method; its fields never fail
		_ = jsonv1.Unmarshal(b, (*plain)(u))
	}
	return nil
}

// decodeCompletion reads a non-streamed completion for /api/ai/generate. A field of an unexpected
// type is skipped (encoding/json fills the others); a message content given as an array of
// content parts, as some OpenAI-compatible servers answer, is read as their texts joined. Only
// that rare answer is read a second time.
func decodeCompletion(body []byte, cr *chatResponse) error {
	err := jsonv1.Unmarshal(body, cr)
	var te *jsonv1.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	var parts struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &parts)
	for i := range min(len(parts.Choices), len(cr.Choices)) {
		if c := parts.Choices[i].Message.Content; len(c) > 0 && c[0] == '[' {
			cr.Choices[i].Message.Content = joinTextParts(c)
		}
	}
	return nil
}

// joinTextParts joins the "text" of an array of content parts whose type is text (or not given).
func joinTextParts(raw json.RawMessage) string {
	var parts []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		var text string
		if (p.Type == "" || p.Type == "text" || p.Type == "output_text") && json.Unmarshal(p.Text, &text) == nil {
			b.WriteString(text)
		}
	}
	return b.String()
}

// upstreamErr is what an upstream's JSON error answer says (any field may be missing).
type upstreamErr struct {
	Message string
	Type    any
	Param   any
	Code    any
}

// parseUpstreamError reads an upstream error answer in OpenAI's format ({"error": {message, type,
// param, code}}), Ollama's ({"error": "..."}), vLLM's or FastAPI's (a top-level message or
// detail). ok is false when the body is no JSON error (an HTML page from a wrong Ai:BaseUrl, a
// proxy's text).
func parseUpstreamError(body []byte) (e upstreamErr, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || (top["error"] == nil && top["message"] == nil && top["detail"] == nil) {
		return e, false
	}
	var detail struct {
		Message string `json:"message"`
		Type    any    `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(top["error"], &detail) != nil {
		_ = json.Unmarshal(top["error"], &detail.Message) // {"error": "model 'x' not found"}
	}
	if detail.Message == "" {
		_ = json.Unmarshal(top["message"], &detail.Message)
		_ = json.Unmarshal(top["param"], &detail.Param)
		if detail.Type == nil {
			_ = json.Unmarshal(top["type"], &detail.Type)
		}
		if detail.Code == nil {
			_ = json.Unmarshal(top["code"], &detail.Code)
		}
	}
	if detail.Message == "" {
		_ = json.Unmarshal(top["detail"], &detail.Message) // FastAPI: {"detail": "..."}
	}
	return upstreamErr(detail), true
}
