package aikeys

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The two JSON documents of every generation, written by hand: the upstream's request and the
// envelope of the answer. They are on the generate route's hot path (README § Performance, P2): in a
// loop, 494 to 175 ns and 848 to 289 ns, one allocation each instead of three. Each produces the
// bytes encoding/json produces for the same value (TestHandWrittenJSONIsEncodingJSONs and its fuzz
// target hold them to it), so nothing a client or the upstream reads changed.

// appendJSONString appends s as a JSON string, exactly as encoding/json writes a string with HTML
// escaping off (huma's JSON format): '"' and '\\' escaped, control characters as \b, \f, \n, \r,
// \t or \u00XX, U+2028 and U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64 (f is finite: the schema bounds it).
func appendJSONFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendChatRequest appends the upstream's chat completion request for a generation: model, the
// system message when there is one, the user's prompt, max_tokens and temperature when given, and
// user when not empty.
func appendChatRequest(dst []byte, model, user string, in GenerateInput) []byte {
	dst = append(dst, `{"model":`...)
	dst = appendJSONString(dst, model)
	dst = append(dst, `,"messages":[`...)
	if in.System != "" {
		dst = append(dst, `{"role":"system","content":`...)
		dst = appendJSONString(dst, in.System)
		dst = append(dst, `},`...)
	}
	dst = append(dst, `{"role":"user","content":`...)
	dst = appendJSONString(dst, in.Prompt)
	dst = append(dst, `}]`...)
	if in.MaxTokens != nil {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(*in.MaxTokens), 10)
	}
	if in.Temperature != nil {
		dst = append(dst, `,"temperature":`...)
		dst = appendJSONFloat(dst, *in.Temperature)
	}
	if user != "" {
		dst = append(dst, `,"user":`...)
		dst = appendJSONString(dst, user)
	}
	return append(dst, '}')
}

// appendGenerationEnvelope appends the 200 answer of a generation, {success, message "OK", data},
// as huma's JSON format writes it (a final newline included).
func appendGenerationEnvelope(dst []byte, g *Generation) []byte {
	dst = append(dst, `{"success":true,"message":"OK","data":{"text":`...)
	dst = appendJSONString(dst, g.Text)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, g.Model)
	dst = append(dst, `,"finishReason":`...)
	dst = appendJSONString(dst, g.FinishReason)
	dst = append(dst, `,"usage":{"promptTokens":`...)
	dst = strconv.AppendInt(dst, g.Usage.PromptTokens, 10)
	dst = append(dst, `,"completionTokens":`...)
	dst = strconv.AppendInt(dst, g.Usage.CompletionTokens, 10)
	dst = append(dst, `,"totalTokens":`...)
	dst = strconv.AppendInt(dst, g.Usage.TotalTokens, 10)
	return append(dst, "}}}\n"...)
}
