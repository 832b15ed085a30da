package authn

import (
	"strings"

	"provisioner/platform/emailaddr"
	"provisioner/platform/fault"
	"provisioner/platform/secrets"
)

// ErrBlankName refuses a fullName of white space: stored trimmed, it would be the empty name the
// schema refuses.
var ErrBlankName = fault.Invalid("Validation failed", fault.FieldError{Field: "fullName", Message: "must not be blank (white space only)"})

// ParseEmail is a bare address as stored (emailaddr.Normalize), or a 400 naming the field.
func ParseEmail(s string) (string, error) {
	email, err := emailaddr.Normalize(s)
	if err != nil {
		return "", fault.Invalid("Validation failed", fault.FieldError{Field: "email", Message: emailaddr.Message})
	}
	return email, nil
}

// NewAccount checks what a new account is made of (a registration, an administrator's create): a
// fullName that is not blank, a bare email and a password secrets.PasswordProblem accepts. It
// returns the email as stored.
func NewAccount(fullName, email, password string) (string, error) {
	if strings.TrimSpace(fullName) == "" {
		return "", ErrBlankName
	}
	email, err := ParseEmail(email)
	if err != nil {
		return "", err
	}
	if msg := secrets.PasswordProblem(password); msg != "" {
		return "", fault.Invalid("Validation failed", fault.FieldError{Field: "password", Message: msg})
	}
	return email, nil
}
