package databases

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/uptrace/bun"

	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
)

// Rotated is the answer of POST /api/me/databases/{id}/rotate-password.
type Rotated struct {
	Reveal
	PreviousUser       string     `json:"previousUser" doc:"The login whose password keeps working until previousValidUntil."`
	PreviousValidUntil *time.Time `json:"previousValidUntil" doc:"When the old password stops working and its sessions end; null: at once."`
}

type rotateInput struct {
	ID   int64 `path:"id" minimum:"1" doc:"databaseInstanceId"`
	Body struct {
		_                  struct{} `additionalProperties:"true"`
		GracePeriodSeconds *int     `json:"gracePeriodSeconds,omitempty" minimum:"0" maximum:"86400" doc:"How long the old password keeps working (its open sessions too); default: the setting Databases:RotationGraceSeconds."`
	}
}

func (h *Handler) registerRotation(api *httpx.API) {
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "rotateMyDatabasePassword",
		Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/databases/{id}/rotate-password", Tags: []string{"Databases"}, Summary: "Rotate a database's password",
		Description: "A new password (of the other of its two logins) works at once; the old one until the grace period ends. " +
			"Limited by `RateLimit:PasswordReveal` and audited. 409 unless Active or Paused, or while a rotation is being set; " +
			"502 when the engine failed (finished in the background).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusForbidden, http.StatusBadGateway}},
		func(ctx context.Context, in *rotateInput) (*httpx.Response[Rotated], error) {
			uid := authn.FromContext(ctx).UserID
			if err := authn.GuardSecret(ctx, h.limiter); err != nil {
				return nil, err
			}
			grace := h.svc.cfg.Databases.RotationGraceSeconds
			if in.Body.GracePeriodSeconds != nil {
				grace = *in.Body.GracePeriodSeconds
			}
			r, err := h.svc.RotatePassword(ctx, in.ID, uid, grace)
			if err != nil {
				return nil, err
			}
			return httpx.OK("Password rotated; the old one works until previousValidUntil", *r), nil
		})
}

// RotatePassword gives an own database a new password with a grace period for the old one: the
// rotation is stored (startRotation, audited database.password.rotated) and driven now. When the
// engine fails the answer is 502 and the finisher sets it; the old password works meanwhile.
func (s *Service) RotatePassword(ctx context.Context, id, userID int64, graceSeconds int) (*Rotated, error) {
	if graceSeconds < 0 || graceSeconds > MaxGraceSeconds {
		return nil, httpx.BadRequest("Validation failed", httpx.FieldError{Field: "gracePeriodSeconds", Message: "must be between 0 and 86400"})
	}
	release, err := s.waits.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var rot *Rotation
	var password string
	var inst *Instance
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		inst, err = s.lock(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if inst.Status != StatusActive && inst.Status != StatusPaused {
			return httpx.Conflict(fmt.Sprintf("Database is %s; only an Active or Paused database's password can be rotated", apiStatus(inst.Status)))
		}
		if _, ok := s.engines.Get(inst.Engine).(loginRotator); !ok {
			return httpx.Unavailable("The database's engine is not configured")
		}
		rot, password, err = startRotation(ctx, tx, s.sealer, inst, nil, graceSeconds, reasonRequested, false)
		if err != nil {
			return err
		}
		return s.audit.RecordTx(ctx, tx, rotatedEvent(inst, rot))
	})
	if err != nil {
		return nil, err
	}
	if err := s.finisher.DriveNow(ctx, RotationKind, rot.ID); err != nil {
		return nil, httpx.BadGateway("The database engine failed; the new password is set in the background (reveal it then) "+
			"and the old one keeps working until then", nil)
	}
	if err := s.db.NewSelect().Model(rot).WherePK().Scan(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("reload password rotation %d: %w", rot.ID, err)
	}
	out := &Rotated{Reveal: Reveal{DatabaseUser: inst.Login(), Password: password}, PreviousUser: rot.OldLogin}
	out.ConnectionString = s.engines.Get(inst.Engine).ConnectionString(inst.DatabaseName, inst.Login(), password)
	if rot.RetireAt != nil {
		t := rot.RetireAt.UTC()
		out.PreviousValidUntil = &t
	}
	return out, nil
}
