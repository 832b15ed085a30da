package aikeys

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Caps are the platform's bounds on what a generation may ask of the upstream (Ai:AllowedModels,
// Ai:MaxTokensPerRequest, Ai:MaxChoices), on both routes, narrowed by a key's own policy.
type Caps struct {
	anyModel     bool
	models       []string
	defaultModel string
	maxTokens    int64
	maxChoices   int64
}

// maxTokensHeader carries, on every generation, the max_tokens the upstream was sent: the
// request's own, or the cap when it asked for more or named none.
const maxTokensHeader = "X-AI-Max-Tokens"

// NewCaps reads the caps from the configuration: an empty Ai:AllowedModels allows
// Ai:DefaultModel only, one entry `*` any model.
func NewCaps(cfg AiConfig) *Caps {
	c := &Caps{defaultModel: cfg.DefaultModel, maxTokens: int64(cfg.MaxTokensPerRequest), maxChoices: int64(cfg.MaxChoices)}
	for _, m := range cfg.AllowedModels {
		switch m = strings.TrimSpace(m); m {
		case "":
		case "*":
			c.anyModel = true
		default:
			c.models = append(c.models, m)
		}
	}
	if len(c.models) == 0 && !c.anyModel {
		c.models = []string{cfg.DefaultModel}
	}
	return c
}

// platformAllows reports whether the platform lets a request name model.
func (c *Caps) platformAllows(model string) bool {
	return c.anyModel || slices.Contains(c.models, model)
}

// Model answers the model to send for requested ("": Ai:DefaultModel), or a 400 naming `model`
// when neither the platform nor the key p allows it.
func (c *Caps) Model(p Principal, requested string) (string, error) {
	model := requested
	if model == "" {
		model = c.defaultModel
	}
	if !c.platformAllows(model) || (len(p.Policy.AllowedModels) > 0 && !slices.Contains(p.Policy.AllowedModels, model)) {
		return "", fmt.Errorf("the model %q is not allowed for this key", model)
	}
	return model, nil
}

// MaxTokens is the most completion tokens one choice of p's request may ask for.
func (c *Caps) MaxTokens(p Principal) int64 {
	if p.Policy.MaxTokensPerRequest > 0 && int64(p.Policy.MaxTokensPerRequest) < c.maxTokens {
		return int64(p.Policy.MaxTokensPerRequest)
	}
	return c.maxTokens
}

// Tokens answers the max_tokens to send for requested (0: none given): at most MaxTokens(p).
func (c *Caps) Tokens(p Principal, requested int64) int64 {
	limit := c.MaxTokens(p)
	if requested <= 0 || requested > limit {
		return limit
	}
	return requested
}

// userField is the `user` sent upstream: the key's owner, whatever the client said.
func userField(p Principal) string { return strconv.FormatInt(p.UserID, 10) }

// wholeNumber reads a JSON number that is a whole number of at least 1 (5, 5.0, 1e3); huge values
// saturate at math.MaxInt64.
func wholeNumber(raw []byte) (int64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
	if err != nil || f != math.Trunc(f) || f < 1 {
		return 0, false
	}
	if f >= math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(f), true
}
