package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/coherent"
	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/idempotency"
	"provisioner/platform/mail"
	"provisioner/platform/ops"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
	"provisioner/platform/redisx"
	"provisioner/platform/secrets"
)

// Version is the build's version, set with -ldflags "-X provisioner/app.Version=…".
var Version = "dev"

// Platform provides the platform services every module builds on.
var Platform = fx.Module("platform",
	fx.Provide(
		NewLogger,
		newPrometheus,
		openDB,
		fx.Annotate(bunIDB, fx.As(new(bun.IDB))),
		newMigrator,
		db.NewMigrated,
		openRedis,
		newBus,
		newLimiter,
		newSealer,
		newHasher,
		newMailer,
		audit.NewRecorder,
		newTokens,
		newGuard,
		newIdempotency,
		newServer,
		newFinisher,
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "platform", FS: migrations.FS} }),
	),
	fx.Provide(httpx.AsRoutes(ops.New)),
	// The bus starts before the server and stops after it (fx stops in reverse order); the server
	// itself is started by Options, after every module.
	fx.Invoke(startBus, startFinisher),
)

// NewLogger is the JSON logger of Log:Level; it also becomes slog's default.
func NewLogger(cfg *config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		level = slog.LevelInfo
	}
	l := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(l)
	return l
}

func newPrometheus() (*prometheus.Registry, *httpx.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, httpx.NewMetrics(reg)
}

func openDB(lc fx.Lifecycle, cfg *config.Config) (*bun.DB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bdb, err := db.Open(ctx, cfg.ConnectionStrings.Control)
	if err != nil {
		return nil, err
	}
	bdb.AddQueryHook(coherent.WriteHook{}) // marks requests that write, for coherent.Middleware
	lc.Append(fx.StopHook(bdb.Close))
	return bdb, nil
}

func newBus(d *bun.DB, log *slog.Logger, reg *prometheus.Registry) *coherent.Bus {
	b := coherent.New(d, coherent.Options{Logger: log})
	reg.MustRegister(b.Collector())
	return b
}

func startBus(lc fx.Lifecycle, b *coherent.Bus) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { b.Start(); return nil },
		OnStop:  b.Stop,
	})
}

func bunIDB(d *bun.DB) *bun.DB { return d }

type migratorIn struct {
	fx.In
	DB   *bun.DB
	Sets []db.Migrations `group:"migrations"`
}

func newMigrator(in migratorIn) (*db.Migrator, error) { return db.NewMigrator(in.DB, in.Sets) }

func openRedis(lc fx.Lifecycle, cfg *config.Config) (*redis.Client, error) {
	c, err := redisx.Open(cfg.Redis.Url) // a bad URL is the setting's *config.ValidationError
	if err != nil || c == nil {
		return nil, err
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

func newLimiter(cfg *config.Config, rc *redis.Client, log *slog.Logger) (*ratelimit.Limiter, error) {
	rates := map[string]string{}
	for name, v := range cfg.RateLimit {
		canonical := ""
		for def := range ratelimit.DefaultRates {
			if strings.EqualFold(def, name) {
				canonical = def
			}
		}
		if canonical == "" {
			// A typo (RateLimit__Logins) would otherwise do nothing while the limit meant keeps
			// its default.
			names := make([]string, 0, len(ratelimit.DefaultRates))
			for def := range ratelimit.DefaultRates {
				names = append(names, def)
			}
			sort.Strings(names)
			return nil, &config.ValidationError{Key: "RateLimit:" + name,
				Reason: "names no rate limit; the limits are " + strings.Join(names, ", ")}
		}
		rates[canonical] = v
	}
	opts := ratelimit.Options{Rates: rates, Logger: log, Prefix: cfg.Redis.KeyPrefix + ":rl"}
	if rc != nil {
		opts.Redis = rc
	}
	l, err := ratelimit.New(opts)
	var re *ratelimit.RateError
	if errors.As(err, &re) {
		return nil, &config.ValidationError{Key: "RateLimit:" + re.Name, Reason: re.Reason()}
	}
	if err != nil {
		return nil, &config.ValidationError{Key: "RateLimit", Reason: err.Error()}
	}
	return l, nil
}

func newSealer(cfg *config.Config) (*secrets.Sealer, error) {
	return secrets.NewSealer(cfg.Secrets.EncryptionKey, cfg.Secrets.PreviousKeys...)
}

func newHasher() *secrets.Hasher { return secrets.NewHasher(0) }

func newMailer(cfg *config.Config, log *slog.Logger) mail.Sender {
	s := cfg.Smtp
	return mail.New(mail.SMTPConfig{Host: s.Host, Port: s.Port, Username: s.Username, Password: s.Password, From: s.From,
		Security: s.Security}, log)
}

func newTokens(cfg *config.Config) (*authn.Tokens, error) {
	return authn.NewTokens(authn.Options{
		Key: []byte(cfg.Jwt.Key), Issuer: cfg.Jwt.Issuer, Audience: cfg.Jwt.Audience, Expiry: cfg.Jwt.Expiry(),
	})
}

func newGuard(t *authn.Tokens, d *bun.DB, l *ratelimit.Limiter, b *coherent.Bus) *authn.Guard {
	g := authn.NewGuard(t, d, b)
	g.PerUser = func(c *fiber.Ctx, userID int64) error {
		r, err := l.Enforce(c.UserContext(), "PerUser", strconv.FormatInt(userID, 10))
		ratelimit.SetHeaders(c, r)
		return err
	}
	g.Limit = func(c *fiber.Ctx, name string, userID int64) error {
		r, err := l.Enforce(c.UserContext(), name, strconv.FormatInt(userID, 10))
		ratelimit.SetHeaders(c, r)
		return err
	}
	return g
}

// tagDescriptions describe the OpenAPI tags: platformTags and every module's.
type tagDescriptions map[string]string

// platformTags describe the tags of the platform's operations, and Public, which several modules use.
var platformTags = map[string]string{
	"Operations": "Liveness and readiness probes.",
	"Public":     "Public information for the landing page.",
}

// newIdempotency keeps the answers of Idempotency-Key requests in the control database: unlike
// Redis (optional, and an evicted or lost key would let a retry create a second resource), it is
// always there, shared by every replica, and durable for the 24 hours a key is kept.
func newIdempotency(lc fx.Lifecycle, d *bun.DB, s *secrets.Sealer, log *slog.Logger, _ *db.Migrated) *idempotency.Store {
	st := idempotency.New(d, s, idempotency.Options{Logger: log})
	lc.Append(fx.StartStopHook(st.Start, st.Stop))
	return st
}

func newServer(cfg *config.Config, log *slog.Logger, m *httpx.Metrics, g *authn.Guard, l *ratelimit.Limiter, b *coherent.Bus,
	idem *idempotency.Store, tags tagDescriptions) (*httpx.Server, error) {
	return httpx.NewServer(httpx.ServerOptions{
		Title:           "Resource Provisioning Service",
		Version:         Version,
		PublicURL:       cfg.Server.PublicUrl,
		Origins:         cfg.AllowedOrigins(),
		TrustedProxies:  cfg.Server.TrustedProxies,
		IPv6LimitPrefix: cfg.Server.Ipv6LimitPrefix,
		WriteTimeout:    time.Duration(cfg.Server.WriteTimeoutSeconds) * time.Second,
		IdleTimeout:     time.Duration(cfg.Server.IdleTimeoutSeconds) * time.Second,
		MaxConnsPerIP:   cfg.Server.MaxConnectionsPerIp,
		Logger:          log,
		Metrics:         m,
		Guard:           g,
		Idempotency:     idem,
		Before: []fiber.Handler{coherent.Middleware(b), l.Middleware("PerIp", func(c *fiber.Ctx) string {
			if httpx.Probe(c.Path()) {
				return ""
			}
			return httpx.FiberClientKey(c)
		})},
		LimitHeaders: ratelimit.DocHeaders(),
		Tags:         tags,
	})
}

type finisherIn struct {
	fx.In
	DB           *bun.DB
	Cfg          *config.Config
	Log          *slog.Logger
	Provisioners []provision.Provisioner `group:"provisioners"`
}

func newFinisher(in finisherIn) (*provision.Finisher, error) {
	f := in.Cfg.Finisher
	return provision.NewFinisher(in.DB, in.Provisioners, provision.FinisherOptions{
		Interval:    time.Duration(f.IntervalMillis) * time.Millisecond,
		MaxAttempts: f.MaxAttempts,
		BatchSize:   f.BatchSize,
		Logger:      in.Log,
	})
}

type serverIn struct {
	fx.In
	LC       fx.Lifecycle
	Cfg      *config.Config
	Server   *httpx.Server
	Routes   []httpx.Routes `group:"routes"`
	Migrated *db.Migrated
	Log      *slog.Logger
}

func startServer(in serverIn) {
	for _, r := range in.Routes {
		r.Register(in.Server.API)
	}
	in.Server.Finish()
	in.LC.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if err := in.Server.Listen(fmt.Sprintf(":%d", in.Cfg.Server.Port)); err != nil {
				return err
			}
			in.Log.Info("listening", "addr", in.Server.Addr(), "version", Version)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			timeout := time.Duration(in.Cfg.Server.ShutdownTimeoutSeconds) * time.Second
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return in.Server.Shutdown(ctx)
		},
	})
}

func startFinisher(lc fx.Lifecycle, cfg *config.Config, f *provision.Finisher, _ *db.Migrated) {
	if cfg.Finisher.Disabled {
		return
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { f.Start(); return nil },
		OnStop:  f.Stop,
	})
}
