package wfauto

import "provisioner/platform/config"

// Config is the wfauto module's configuration section, WfautoProvisioning:* (the external cell).
type Config struct {
	BaseUrl        string `koanf:"baseurl"`
	ApiKey         string `koanf:"apikey"`
	TimeoutSeconds int    `koanf:"timeoutseconds"`
}

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Key:      "WfautoProvisioning",
	Defaults: Config{TimeoutSeconds: 15},
	Doc: map[string]string{
		"BaseUrl":        "the workflow-automation provisioning cell (an absolute http(s) URL)",
		"ApiKey":         "secret",
		"TimeoutSeconds": "at least 1",
	},
}

// Validate implements config.Validator; a timeout of 0 would hold a finisher's row for ever.
func (c Config) Validate() error {
	if err := config.OptionalURL("WfautoProvisioning:BaseUrl", c.BaseUrl, "https://cell.example.com"); err != nil {
		return err
	}
	if c.TimeoutSeconds < 1 {
		return &config.ValidationError{Key: "WfautoProvisioning:TimeoutSeconds", Reason: "must be at least 1 (seconds)"}
	}
	return nil
}
