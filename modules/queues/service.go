package queues

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Service manages queue spaces: the intent stored, the broker called, the outcome recorded.
type Service struct {
	db       *bun.DB
	cfg      Config
	sealer   *secrets.Sealer
	audit    *audit.Recorder
	finisher *provision.Finisher
}

// enabled is the 503 of every route that would call the broker while none is configured.
func (s *Service) enabled() error {
	if !s.cfg.Enabled() {
		return fault.Unavailable("Queue spaces are not configured (Queues:ManagementUrl)")
	}
	return nil
}

// newNames returns a fresh virtual host and user name: random, never user text.
func newNames() (vhost, username string) {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	t := hex.EncodeToString(b)
	return "qs-" + t, "qu-" + t
}

// Create stores a Provisioning space for userID and drives it once. It returns the space as it
// then stands and the outcome.
func (s *Service) Create(ctx context.Context, userID int64, name string) (*Space, provision.Outcome, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, provision.Outcome{}, fault.InvalidField("name", "must not be blank")
	}
	if err := s.enabled(); err != nil {
		return nil, provision.Outcome{}, err
	}
	vhost, username := newNames()
	sealed, err := s.sealer.Seal([]byte(secrets.RandomPassword()), passwordAAD(username))
	if err != nil {
		return nil, provision.Outcome{}, fmt.Errorf("seal queue space password: %w", err)
	}
	sp := &Space{Name: name, VHost: vhost, Username: username, PasswordSealed: sealed,
		MaxConnections: s.cfg.MaxConnections, MaxQueues: s.cfg.MaxQueues, State: spec.Intent(userID)}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.roomFor(ctx, tx, userID); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(sp).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("store queue space intent: %w", err)
		}
		return s.audit.RecordTx(ctx, tx, spec.Event("queues.requested", userID, sp.ID, map[string]any{"vhost": vhost}))
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	out, o, err := provision.Run[Space](ctx, s.finisher, s.db, spec, sp.ID, provision.Stored)
	if out != nil && (out.Status == StatusDeleting || out.Status == StatusDeleted) {
		return nil, provision.Outcome{}, db.UserGone(ctx, userID) // the user was deleted meanwhile
	}
	return out, o, err
}

// roomFor checks Queues:MaxPerUser for one more live space of userID (provision.Spec.RoomFor).
func (s *Service) roomFor(ctx context.Context, tx bun.Tx, userID int64) error {
	return spec.RoomFor(ctx, tx, (*Space)(nil), userID, s.cfg.MaxPerUser,
		fmt.Sprintf("Quota reached: at most %d queue spaces per user (Queues:MaxPerUser)", s.cfg.MaxPerUser))
}

// get reads a space; userID 0 reads anyone's (administrators). A Deleted space is not found.
func (s *Service) get(ctx context.Context, id, userID int64) (*Space, error) {
	sp, err := provision.Find[Space](ctx, s.db, id, msgNotFound)
	if err == nil && userID != 0 && (sp.UserID != userID || sp.Status == StatusDeleted) {
		return nil, fault.NotFound(msgNotFound)
	}
	return sp, err
}

// msgNotFound is the 404 of a space.
const msgNotFound = "Queue space not found"

// List returns the user's spaces, oldest first, Deleted ones left out.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	return provision.List(ctx, s.db, userID, []string{StatusDeleted}, func(sp *Space) View { return view(s.cfg, sp) })
}

// Delete removes a space: Provisioning, Active or Failed → Deleting → removed at the broker →
// Deleted. A space already Deleting is driven again once its next attempt is due; before that the
// broker is not called and the space is returned as it stands.
func (s *Service) Delete(ctx context.Context, id, userID int64) (*Space, provision.Outcome, error) {
	return provision.DeleteNow[Space](ctx, s.finisher, s.db, spec, id, userID, provision.Deleting[Space]{NotFound: msgNotFound,
		Check: s.enabled, Audit: func(ctx context.Context, tx bun.Tx, sp *Space) error {
			return s.audit.RecordTx(ctx, tx, spec.Event("queues.deleted", sp.UserID, sp.ID, map[string]any{"vhost": sp.VHost}))
		}})
}

// Retry provisions a Failed space again (within its user's quota), or drives a Provisioning or
// Deleting one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Space, provision.Outcome, error) {
	return provision.RetryNow[Space](ctx, s.finisher, s.db, spec, id, provision.Retrying{What: "queue space", NotFound: msgNotFound,
		Check: s.enabled, Room: s.roomFor})
}

// Reveal returns the password of an own Active space, audited (no reveal without its record).
func (s *Service) Reveal(ctx context.Context, id, userID int64) (*Reveal, error) {
	sp, err := s.get(ctx, id, userID)
	if err != nil {
		return nil, err
	}
	if sp.Status != StatusActive {
		return nil, fault.Conflict(fmt.Sprintf("The queue space is %s; its password is available once it is Active", sp.Status))
	}
	pw, err := s.sealer.Open(sp.PasswordSealed, passwordAAD(sp.Username))
	if err != nil {
		return nil, fmt.Errorf("open queue space password %d: %w", id, err)
	}
	if err := s.audit.Record(ctx, spec.Event("queues.password.revealed", sp.UserID, id, nil)); err != nil {
		return nil, err
	}
	return &Reveal{Username: sp.Username, Password: string(pw), AmqpURL: amqpURL(s.cfg, sp, string(pw))}, nil
}

// Reveal is a space's credentials.
type Reveal struct {
	Username string `json:"username"`
	Password string `json:"password"`
	AmqpURL  string `json:"amqpUrl"`
}
