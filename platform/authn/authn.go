// Package authn issues and checks access tokens (HS256 JWTs) and guards operations: a valid token
// of a live user for Authenticated operations, and the user's current role Admin for AdminOnly ones.
// The user's current role and security stamp decide every request, so a role change or a password
// reset takes effect on the user's next request, not at the next login. They come from a cache
// kept coherent with the users table on every replica (platform/coherent), so a request costs no
// database round trip. With UseSessions, a token also needs its sign-in session (claim sid) to be
// live, read from the session cache the auth module keeps coherent the same way, so a logout
// refuses the session's tokens on every replica from the next request on.
package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	jwtware "github.com/gofiber/contrib/jwt"
	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"
	"github.com/uptrace/bun"

	"provisioner/platform/coherent"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/httpx"
	"provisioner/platform/reqctx"
)

// Roles.
const (
	RoleUser  = "User"
	RoleAdmin = "Admin"
)

// Claims are the access token's claims: sub, email, name, role, iss, aud, iat, exp, jti, plus
// ver, the user's security stamp when the token was issued (a password reset bumps it), and sid,
// the sign-in session the token belongs to (its end refuses the token).
type Claims struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	Role  string `json:"role"`
	Ver   int64  `json:"ver"`
	Sid   int64  `json:"sid,omitempty"`
	jwt.RegisteredClaims
}

// Principal is the authenticated user of a request, as currently stored.
type Principal struct {
	UserID int64
	Email  string
	Name   string
	Role   string
	// SessionID is the sign-in session of the token (0 when the guard checks no sessions).
	SessionID int64

	// session is the state of that session when the request came in; stepUp is how recently a
	// second factor must have been passed for RequireStepUp.
	session Session
	stepUp  time.Duration

	// What the guard accepted, for LockCaller: the security stamp, and whether the operation
	// needs the Admin role. guarded is false for a principal made with WithPrincipal.
	guarded   bool
	stamp     int64
	needAdmin bool
}

// IsAdmin reports whether the principal's current role is Admin.
func (p *Principal) IsAdmin() bool { return p != nil && p.Role == RoleAdmin }

// FromContext returns the request's principal, or nil on public operations. The principal is the
// request's reqctx.Caller, so the packages below the HTTP layer find it too.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(reqctx.CallerKey{}).(*Principal)
	return p
}

// WithPrincipal returns ctx carrying p (background work acting for a user, tests).
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, reqctx.CallerKey{}, p)
}

// CallerID implements reqctx.Caller.
func (p *Principal) CallerID() int64 {
	if p == nil {
		return 0
	}
	return p.UserID
}

// GoneError implements reqctx.Caller: the guard's 401 for a token it does not accept.
func (p *Principal) GoneError() error { return invalidToken() }

// Options configures the token service.
type Options struct {
	Key      []byte
	Issuer   string
	Audience string
	Expiry   time.Duration
}

// Tokens issues and verifies access tokens.
type Tokens struct {
	o         Options
	validator *jwt.Validator
	parser    *jwt.Parser
	audience  jwt.ClaimStrings // o.Audience, shared by the claims verifiedTokens keeps
}

// NewTokens builds the token service; the key must have at least 256 bits.
func NewTokens(o Options) (*Tokens, error) {
	if len(o.Key) < 32 {
		return nil, errors.New("jwt key: at least 32 bytes are required")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(o.Issuer),
		jwt.WithAudience(o.Audience),
		jwt.WithLeeway(5 * time.Second),
	}
	return &Tokens{o: o, validator: jwt.NewValidator(opts...), parser: jwt.NewParser(opts...),
		audience: jwt.ClaimStrings{o.Audience}}, nil
}

// Issued is a freshly signed token.
type Issued struct {
	Token     string
	ExpiresAt time.Time
}

// User is what a token is issued for: a user, in one of its sign-in sessions.
type User struct {
	ID            int64
	Email, Name   string
	Role          string
	SecurityStamp int64
	SessionID     int64
}

// Issue signs an access token for u.
func (t *Tokens) Issue(u User) (Issued, error) {
	now := time.Now().UTC().Truncate(time.Second)
	exp := now.Add(t.o.Expiry)
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	claims := Claims{
		Email: u.Email, Name: u.Name, Role: u.Role, Ver: u.SecurityStamp, Sid: u.SessionID,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(u.ID, 10),
			Issuer:    t.o.Issuer,
			Audience:  jwt.ClaimStrings{t.o.Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
			ID:        hex.EncodeToString(jti[:]),
		},
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.o.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("sign token: %w", err)
	}
	return Issued{Token: s, ExpiresAt: exp}, nil
}

// Parse verifies a token string completely (signature, algorithm, no crit header, exp, iat, iss,
// aud) and returns its claims. It is the same check the guard applies.
func (t *Tokens) Parse(token string) (*Claims, error) {
	var c Claims
	if _, err := t.parser.ParseWithClaims(token, &c, t.keyFunc); err != nil {
		return nil, err
	}
	return &c, nil
}

// errCritical refuses a token whose header has crit: RFC 7515 §4.1.11 has a recipient refuse a
// JWS whose crit names extensions it does not understand, and this service understands none
// (golang-jwt does not look at crit).
var errCritical = errors.New("token header lists critical extensions")

// keyFunc is the one key lookup of Parse and the guard: HS256 only, no crit header.
func (t *Tokens) keyFunc(tok *jwt.Token) (any, error) {
	if tok.Method != jwt.SigningMethodHS256 {
		return nil, fmt.Errorf("unexpected signing method %v", tok.Header["alg"])
	}
	if _, ok := tok.Header["crit"]; ok {
		return nil, errCritical
	}
	return t.o.Key, nil
}

// Guard protects operations with the access token and the user's current state.
type Guard struct {
	tokens *Tokens
	db     bun.IDB
	users  *coherent.Cache[int64, cachedUser]
	mw     fiber.Handler
	// verified remembers the claims of tokens already verified (see verifiedTokens).
	verified verifiedTokens
	// PerUser, when set, counts the request against the per-user limit; its error is written as is.
	PerUser func(c *fiber.Ctx, userID int64) error
	// Limit, when set, counts the limit an operation names (httpx.PerUserLimit) for the caller,
	// once authenticated; its error is written as is.
	Limit func(c *fiber.Ctx, name string, userID int64) error

	// sessions, when set (UseSessions), decides whether a token's session still lives.
	sessions Sessions
	stepUp   time.Duration
}

// Session is what the guard needs to know of a sign-in session.
type Session struct {
	UserID int64
	// Live is false once the session has ended (logout, revocation, reuse of a refresh token).
	Live bool
	// MFAAt is when the session last passed a second factor; zero if never.
	MFAAt time.Time
	// MFAOn reports whether the session's user has a second factor turned on.
	MFAOn bool
}

// Sessions looks up sign-in sessions for the guard. Session returns ErrNoSession for an unknown
// id; it must be cheap (the guard calls it on every request) and reflect an ended session on the
// next request, on every replica.
type Sessions interface {
	Session(ctx context.Context, id int64) (Session, error)
}

// ErrNoSession is Sessions' answer for an unknown session.
var ErrNoSession = errors.New("no such session")

// UseSessions makes the guard accept only tokens of a live session (claim sid) and remember the
// session's second factor for RequireStepUp, which asks for one passed within stepUp. Call it
// before the server starts.
func (g *Guard) UseSessions(s Sessions, stepUp time.Duration) {
	g.sessions, g.stepUp = s, stepUp
}

// RequireStepUp refuses (403) an operation of a user with a second factor on whose session has
// not passed it within the guard's step-up time (UseSessions). It lets everything else through:
// a user without a second factor, a context the guard did not let in (background work).
func RequireStepUp(ctx context.Context) error {
	p := FromContext(ctx)
	if p == nil || !p.guarded || !p.session.MFAOn {
		return nil
	}
	if !p.session.MFAAt.IsZero() && time.Since(p.session.MFAAt) <= p.stepUp {
		return nil
	}
	return fault.Forbidden(fmt.Sprintf("This needs a second factor passed within the last %d minutes: send a TOTP or "+
		"recovery code to POST /api/me/mfa/step-up, then try again", int(p.stepUp.Minutes())))
}

const tokenLocal = "authn.token"

// cachedUser is the cached state of a live user, compact (one is kept per user signed in): the
// security stamp, and the email, name and role in one string: text[:emailEnd], then
// text[emailEnd:nameEnd], then the role, not stored when it is User (the users table allows User
// and Admin only).
type cachedUser struct {
	stamp             int64
	text              string
	emailEnd, nameEnd uint32
}

func newCachedUser(email, name, role string, stamp int64) cachedUser {
	text := email + name
	if role != RoleUser {
		text += role
	}
	return cachedUser{stamp: stamp, text: text, emailEnd: uint32(len(email)), nameEnd: uint32(len(email) + len(name))}
}

// principal is user id's principal as cached.
func (u cachedUser) principal(id int64) Principal {
	role := RoleUser
	if int(u.nameEnd) < len(u.text) {
		role = u.text[u.nameEnd:]
	}
	return Principal{UserID: id, Email: u.text[:u.emailEnd], Name: u.text[u.emailEnd:u.nameEnd], Role: role}
}

// errNoUser means the token's user is missing or deleted (never cached).
var errNoUser = errors.New("no live user")

// invalidToken is the guard's 401 for a token it does not accept.
func invalidToken() *httpx.Error { return httpx.Unauthorized("Invalid or expired token") }

// UserGone is the error for an account found missing or deleted while a request is served:
// db.UserGone (the guard's 401 when it is the request's own principal, else a 404 "User not found").
func UserGone(ctx context.Context, userID int64) error { return db.UserGone(ctx, userID) }

// NewGuard builds the guard. gofiber/contrib/jwt extracts and verifies the token with the
// algorithm pinned to HS256; the claims it does not check (exp required, iss, aud) are checked
// with golang-jwt's validator right after. Users are cached through bus (nil: read every time).
func NewGuard(tokens *Tokens, db bun.IDB, bus *coherent.Bus) *Guard {
	g := &Guard{tokens: tokens, db: db, users: coherent.NewCache(bus, coherent.CacheOptions[int64, cachedUser]{
		Table: "users", Tag: coherent.IDTag[cachedUser], Key: coherent.IDKey,
	})}
	g.mw = jwtware.New(jwtware.Config{
		SigningKey:     jwtware.SigningKey{JWTAlg: jwtware.HS256, Key: tokens.o.Key},
		KeyFunc:        tokens.keyFunc,
		Claims:         &Claims{},
		ContextKey:     tokenLocal,
		SuccessHandler: func(*fiber.Ctx) error { return nil },
		ErrorHandler: func(_ *fiber.Ctx, err error) error {
			if errors.Is(err, jwtware.ErrJWTMissingOrMalformed) {
				return httpx.Unauthorized("Missing or malformed bearer token")
			}
			return invalidToken()
		},
	})
	return g
}

// Middleware implements httpx.Guard.
func (g *Guard) Middleware(api huma.API, access httpx.Access) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		fc := humafiber.Unwrap(ctx)
		p, err := g.Authenticate(fc)
		if err == nil && access == httpx.AdminOnly && !p.IsAdmin() {
			err = httpx.Forbidden("The Admin role is required")
		}
		if name, _ := ctx.Operation().Metadata[httpx.UserLimitKey].(string); err == nil && name != "" && g.Limit != nil {
			err = g.Limit(fc, name, p.UserID)
		}
		if err != nil {
			WriteError(api, ctx, challenge(err, fc.Get(fiber.HeaderAuthorization)))
			return
		}
		p.needAdmin = access == httpx.AdminOnly
		fc.Locals(reqctx.CallerKey{}, p)
		next(huma.WithValue(ctx, reqctx.CallerKey{}, p))
	}
}

// challenge adds the WWW-Authenticate header a 401 must carry (RFC 9110 §11.6.1, RFC 6750 §3):
// `Bearer` when the request carried no bearer token, `Bearer error="invalid_token"` when the token
// it carried is malformed, expired, revoked or of a deleted user.
func challenge(err error, authorization string) error {
	var e *httpx.Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		return err
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
		return e.WithHeader(fiber.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	}
	return e.WithHeader(fiber.HeaderWWWAuthenticate, "Bearer")
}

// WriteError writes err as the envelope through huma, with the headers it carries.
func WriteError(api huma.API, ctx huma.Context, err error) {
	e := httpx.FromError(err)
	for k, v := range e.GetHeaders() {
		ctx.SetHeader(k, v[0])
	}
	_ = huma.WriteErr(api, ctx, e.Status, e.Message)
}

// verifiedTokens remembers the claims of bearer tokens whose signature, algorithm and header were
// verified, keyed by the token text's SHA-256, so a token sent on every request is verified once.
// Only what the guard and the validator read is kept (trimmed). Claims are validated again on
// every use (exp may pass); the stamp and role are checked after this. At maxVerified tokens the
// map starts afresh (only valid tokens are ever added).
type verifiedTokens struct {
	mu sync.RWMutex
	m  map[[sha256.Size]byte]*Claims
}

const maxVerified = 4096

func (v *verifiedTokens) get(token string) *Claims {
	k := sha256.Sum256([]byte(token))
	v.mu.RLock()
	c := v.m[k]
	v.mu.RUnlock()
	return c
}

func (v *verifiedTokens) put(token string, c *Claims) {
	k := sha256.Sum256([]byte(token))
	v.mu.Lock()
	if v.m == nil || len(v.m) >= maxVerified {
		v.m = make(map[[sha256.Size]byte]*Claims)
	}
	v.m[k] = c
	v.mu.Unlock()
}

func (v *verifiedTokens) drop(token string) {
	k := sha256.Sum256([]byte(token))
	v.mu.Lock()
	delete(v.m, k)
	v.mu.Unlock()
}

// trimmed is what verifiedTokens keeps of c: the claims Authenticate reads (sub, ver, sid) and
// those the validator checks, the issuer and audience being the service's own (they were checked).
func (t *Tokens) trimmed(c *Claims) *Claims {
	return &Claims{Ver: c.Ver, Sid: c.Sid, RegisteredClaims: jwt.RegisteredClaims{
		Subject: c.Subject, Issuer: t.o.Issuer, Audience: t.audience,
		ExpiresAt: c.ExpiresAt, NotBefore: c.NotBefore, IssuedAt: c.IssuedAt,
	}}
}

// bearerToken is the token gofiber/contrib/jwt extracts from c (its jwtFromHeader with the Bearer
// scheme), or "".
func bearerToken(c *fiber.Ctx) string {
	auth := c.Get(fiber.HeaderAuthorization)
	const scheme = "Bearer "
	if len(auth) > len(scheme)+1 && strings.EqualFold(auth[:len(scheme)], scheme) {
		return strings.TrimSpace(auth[len(scheme):])
	}
	return ""
}

// claims checks the bearer token of c: verified before (and still valid), or verified now by the
// jwt middleware and the validator. Errors are *httpx.Error.
func (g *Guard) claims(c *fiber.Ctx) (*Claims, error) {
	raw := bearerToken(c)
	if raw != "" {
		if claims := g.verified.get(raw); claims != nil {
			if g.tokens.validator.Validate(claims) != nil {
				g.verified.drop(raw)
				return nil, invalidToken()
			}
			return claims, nil
		}
	}
	if err := g.mw(c); err != nil {
		return nil, err
	}
	tok, _ := c.Locals(tokenLocal).(*jwt.Token)
	if tok == nil {
		return nil, invalidToken()
	}
	claims, ok := tok.Claims.(*Claims)
	if !ok || g.tokens.validator.Validate(claims) != nil {
		return nil, invalidToken()
	}
	if raw != "" && raw == tok.Raw {
		claims = g.tokens.trimmed(claims)
		g.verified.put(raw, claims)
	}
	return claims, nil
}

// Authenticate checks the bearer token of c and loads its user. Errors are *httpx.Error.
func (g *Guard) Authenticate(c *fiber.Ctx) (*Principal, error) {
	claims, err := g.claims(c)
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || id <= 0 {
		return nil, invalidToken()
	}
	u, err := g.users.Get(c.UserContext(), id, func(ctx context.Context) (cachedUser, error) { return g.load(ctx, id) })
	if errors.Is(err, errNoUser) || (err == nil && u.stamp != claims.Ver) {
		return nil, invalidToken()
	}
	if err != nil {
		return nil, err
	}
	p := u.principal(id) // a copy per request: handlers may keep it
	p.guarded, p.stamp = true, u.stamp
	if g.sessions != nil {
		if claims.Sid <= 0 {
			return nil, invalidToken()
		}
		st, err := g.sessions.Session(c.UserContext(), claims.Sid)
		if errors.Is(err, ErrNoSession) || (err == nil && (!st.Live || st.UserID != id)) {
			return nil, invalidToken()
		}
		if err != nil {
			return nil, err
		}
		p.SessionID, p.session, p.stepUp = claims.Sid, st, g.stepUp
	}
	if g.PerUser != nil {
		if err := g.PerUser(c, id); err != nil {
			return nil, err
		}
	}
	return &p, nil
}

func (g *Guard) load(ctx context.Context, id int64) (cachedUser, error) {
	var row struct {
		ID            int64  `bun:"id"`
		Email         string `bun:"email"`
		Name          string `bun:"full_name"`
		Role          string `bun:"role"`
		SecurityStamp int64  `bun:"security_stamp"`
	}
	err := g.db.NewSelect().Table("users").Column("id", "email", "full_name", "role", "security_stamp").
		Where("id = ?", id).Where("deleted_at IS NULL").Scan(ctx, &row)
	if err != nil {
		if errors.Is(err, sqlErrNoRows) {
			return cachedUser{}, errNoUser
		}
		return cachedUser{}, fmt.Errorf("load principal: %w", errors.Join(httpx.ErrUnavailable, err))
	}
	return newCachedUser(row.Email, row.Name, row.Role, row.SecurityStamp), nil
}

var sqlErrNoRows = sql.ErrNoRows

// LockCaller checks again, inside tx, what the guard checked from its cache when the request came
// in: the caller is a live user with its token's security stamp and, on an AdminOnly operation,
// still an Admin; else 401 or 403 and tx writes nothing. It locks the caller's users row FOR KEY
// SHARE until tx ends, so a deletion, demotion or password reset (which lock it FOR UPDATE) either
// waits for the write or is seen by it. Every write transaction of a request calls it first
// (db.RunInTx); it does nothing without a principal (public operations, background work).
func LockCaller(ctx context.Context, tx bun.IDB) error { return FromContext(ctx).LockCaller(ctx, tx) }

// LockCaller implements reqctx.Caller: see the function LockCaller.
func (p *Principal) LockCaller(ctx context.Context, tx bun.IDB) error {
	if p == nil || !p.guarded {
		return nil
	}
	var row struct {
		Role  string `bun:"role"`
		Stamp int64  `bun:"security_stamp"`
		Live  bool   `bun:"live"`
	}
	err := tx.NewSelect().Table("users").Column("role", "security_stamp").ColumnExpr("deleted_at IS NULL AS live").
		Where("id = ?", p.UserID).For("KEY SHARE").Scan(ctx, &row)
	if errors.Is(err, sqlErrNoRows) || (err == nil && (!row.Live || row.Stamp != p.stamp)) {
		return invalidToken().WithHeader(fiber.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	}
	if err != nil {
		return fmt.Errorf("lock caller %d: %w", p.UserID, err)
	}
	if p.needAdmin && row.Role != RoleAdmin {
		return httpx.Forbidden("The Admin role is required")
	}
	return nil
}

var _ reqctx.Caller = (*Principal)(nil)
