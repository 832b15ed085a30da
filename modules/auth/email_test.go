package auth_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

// notBare are addresses net/mail.ParseAddress (and so huma's format:"email") accepts although
// they are not a bare address; each contains the victim's address.
func notBare(victim string) []string {
	local, domain, _ := strings.Cut(victim, "@")
	return []string{
		"Eve <" + victim + ">",
		`"Eve" <` + victim + ">",
		"<" + victim + ">",
		victim + " (Eve)",
		`"` + local + `"@` + domain,
		`"` + local + `\u0000"@` + domain,
	}
}

// An address with a display name, quotes or a comment is refused naming email by register, login
// and forgot-password: no second account for the victim's mailbox, no reset mail to the victim.
func TestEmailMustBeABareAddress(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port,
		"RateLimit:Register": "1000-M", "RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M", "RateLimit:ForgotPassword": "1000-H", "RateLimit:ForgotPasswordPerIp": "1000-H"}))
	victim := a.Register(t)
	for _, addr := range notBare(victim.Email) {
		t.Run(addr, func(t *testing.T) {
			r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Eve", "email": addr, "password": goodPassword})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"email"}, r.Fields(), string(r.Raw))
			assert.Contains(t, string(r.Raw), "ada@example.com", "the message shows the expected form")

			r = a.Post("/api/auth/login", "", map[string]any{"email": addr, "password": victim.Password})
			assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"email"}, r.Fields(), string(r.Raw))

			r = a.Post("/api/auth/forgot-password", "", map[string]any{"email": addr})
			assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"email"}, r.Fields(), string(r.Raw))
		})
	}
	var n int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM users WHERE position(? in lower(email)) > 0", strings.ToLower(strings.SplitN(victim.Email, "@", 2)[0])).Scan(&n))
	assert.Equal(t, 1, n, "no second account around the victim's address")
	time.Sleep(300 * time.Millisecond) // a reset mail would be on its way by now
	assert.Zero(t, smtp.CountTo(victim.Email), "no reset mail reached the victim")

	// The bare address, in any case and with surrounding blanks, still works.
	r := a.Post("/api/auth/login", "", map[string]any{"email": "  " + strings.ToUpper(victim.Email) + " ", "password": victim.Password})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}

func TestOAuthRefusesAnEmailThatIsNotBare(t *testing.T) {
	a, p := startOAuth(t)
	victim := a.Register(t)
	eve := oauthID()
	p.github.SetUser(oauthtest.User{ID: eve, Login: "eve", Name: "Eve",
		Email: "Eve <" + victim.Email + ">", EmailVerified: true})
	end := signIn(t, a, browser(t, p), "github", "")
	f := fragment(end)
	assert.Equal(t, "email_invalid", f.Get("error"), end.String())
	assert.Empty(t, f.Get("access_token"))
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM user_identities WHERE provider_user_id = ?", eve).Scan(&n))
	assert.Zero(t, n, "no identity linked or created")
}

// TestInternationalAddressesAreDocumentedAsSuch: an address with a non-ASCII local part or domain
// is accepted and answered as stored, so the document calls the email fields idn-email (RFC 6531),
// not email, which a client validating the answer against the schema would refuse.
func TestInternationalAddressesAreDocumentedAsSuch(t *testing.T) {
	a := apptest.Start(t)
	email := "nü" + testutil.RandomSuffix() + "@bücher.example"
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Nü", "email": email, "password": "a-long-password-1"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got struct {
		User struct {
			Email string `json:"email"`
		} `json:"user"`
	}
	r.Decode(t, &got)
	assert.Contains(t, got.User.Email, "ü", "answered with its non-ASCII characters")
	doc := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, doc.Status)
	assert.NotContains(t, string(doc.Raw), `"format":"email"`)
	assert.Contains(t, string(doc.Raw), `"format":"idn-email"`)
}
