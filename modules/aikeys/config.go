package aikeys

import "provisioner/platform/config"

// Config is the aikeys module's configuration section: the keys Ai:* and AiKeys:*.
type Config struct {
	Ai     AiConfig   `koanf:"ai"`
	AiKeys KeysConfig `koanf:"aikeys"`
}

// AiConfig configures the OpenAI-compatible generation upstream.
type AiConfig struct {
	BaseUrl        string `koanf:"baseurl"`
	ApiKey         string `koanf:"apikey"`
	DefaultModel   string `koanf:"defaultmodel"`
	TimeoutSeconds int    `koanf:"timeoutseconds"`
	// AllowedModels: empty allows DefaultModel only; "*" allows any model.
	AllowedModels       []string `koanf:"allowedmodels"`
	MaxTokensPerRequest int      `koanf:"maxtokensperrequest"`
	MaxChoices          int      `koanf:"maxchoices"`
}

// KeysConfig holds the AI key quota.
type KeysConfig struct {
	MaxPerUser                int   `koanf:"maxperuser"`
	DefaultMonthlyTokenBudget int64 `koanf:"defaultmonthlytokenbudget"`
}

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Defaults: Config{Ai: AiConfig{TimeoutSeconds: 120, MaxTokensPerRequest: 4096, MaxChoices: 1}, AiKeys: KeysConfig{MaxPerUser: 10}},
	Doc: map[string]string{
		"Ai:BaseUrl":                       "OpenAI-compatible upstream (an absolute http(s) URL), e.g. http://127.0.0.1:11434/v1",
		"Ai:ApiKey":                        "secret; redacted from what the upstream sends back (under 16 characters: a placeholder, not redacted)",
		"Ai:TimeoutSeconds":                "a non-streamed answer's whole time; for a stream, each wait for the next chunk; at least 1",
		"Ai:AllowedModels":                 "models a request may name (comma-separated); empty: Ai:DefaultModel only; `*`: any",
		"Ai:MaxTokensPerRequest":           "max_tokens sent upstream: a larger or missing one is capped to this (the answer's X-AI-Max-Tokens says the cap); at least 1",
		"AiKeys:DefaultMonthlyTokenBudget": "tokenBudget (budgetPeriod month) of a new key whose create names no tokenBudget; 0: none",
		"Ai:MaxChoices":                    "most choices (`n`) a request may ask for; more is a 400; at least 1",
	},
}

// Validate implements config.Validator. 0 does not mean "no limit": the client would give up at
// once (every call a 502 upstream_timeout).
func (c Config) Validate() error {
	if err := config.OptionalURL("Ai:BaseUrl", c.Ai.BaseUrl, "http://127.0.0.1:11434/v1"); err != nil {
		return err
	}
	if c.Ai.TimeoutSeconds < 1 {
		return &config.ValidationError{Key: "Ai:TimeoutSeconds", Reason: "must be at least 1 (seconds)"}
	}
	if c.Ai.MaxTokensPerRequest < 1 {
		return &config.ValidationError{Key: "Ai:MaxTokensPerRequest", Reason: "must be at least 1"}
	}
	if c.AiKeys.DefaultMonthlyTokenBudget < 0 {
		return &config.ValidationError{Key: "AiKeys:DefaultMonthlyTokenBudget", Reason: "must be 0 (none) or more"}
	}
	if c.Ai.MaxChoices < 1 {
		return &config.ValidationError{Key: "Ai:MaxChoices", Reason: "must be at least 1"}
	}
	return nil
}
