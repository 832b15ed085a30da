package databases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// CredentialKind is the finisher's name for access credentials.
const CredentialKind provision.Kind = "credential"

// credentialGrace is how long a Creating row belongs to the request that inserted it before the
// finisher may undo it. The request locks the row right after inserting it and holds the lock
// while it asks the engine (at most engineTimeout), and the finisher skips locked rows; the grace
// covers the moment between the insert and the lock.
const credentialGrace = time.Minute

// CredentialProvisioner finishes access credentials a crash or a failed engine call left
// in-between: a Creating row (the client never got its password) is undone and a Deleting row is
// dropped; both end Deleted. Credentials are never created by the finisher.
type CredentialProvisioner struct {
	engines *Engines
}

// Kind implements provision.Provisioner.
func (p *CredentialProvisioner) Kind() provision.Kind { return CredentialKind }

// Table implements provision.Queue.
func (p *CredentialProvisioner) Table() string { return "access_credentials" }

// InFlight implements provision.Queue: both in-between statuses are finished by dropping.
func (p *CredentialProvisioner) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{CredentialCreating: provision.VerbDelete, CredentialDeleting: provision.VerbDelete}
}

// Create is never called (no status maps to it): only a request creates a credential, because
// only the request can hand its password to the client.
func (p *CredentialProvisioner) Create(context.Context, provision.CreateRequest) (provision.CreateResponse, error) {
	return provision.CreateResponse{}, errors.New("access credentials are created by their request only")
}

// Delete drops the credential's role, if this credential made it, and marks the row Deleted. A
// role that is gone, or was not made for this credential, is not an error.
func (p *CredentialProvisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	cr := new(Credential)
	if err := req.Tx.NewSelect().Model(cr).Where("id = ?", req.ResourceID).Scan(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("load credential %d: %w", req.ResourceID, err)
	}
	return provision.DeleteResponse{}, dropCredential(ctx, req.Tx, p.engines, cr)
}

// dropCredential drops cr's marked role on its database's engine (nothing to do once the database
// is Deleted: its credentials' roles went with it) and marks the row Deleted through tx.
func dropCredential(ctx context.Context, tx bun.IDB, engines *Engines, cr *Credential) error {
	inst := new(Instance)
	if err := tx.NewSelect().Model(inst).Where("id = ?", cr.DatabaseInstanceID).Scan(ctx); err != nil {
		return fmt.Errorf("load database of credential %d: %w", cr.ID, err)
	}
	if inst.Status != StatusDeleted {
		engine := engines.Get(inst.Engine)
		if engine == nil {
			return fmt.Errorf("engine %q is not configured", inst.Engine)
		}
		ectx, cancel := context.WithTimeout(ctx, engineTimeout)
		defer cancel()
		// A role not made for this credential (ErrRoleTaken) is not ours to drop.
		if err := engine.DropUser(ectx, inst.DatabaseName, cr.Username, CredentialMarker(cr.ID, cr.MarkerToken)); err != nil && !errors.Is(err, ErrRoleTaken) {
			return fmt.Errorf("drop credential %s: %w", cr.Username, err)
		}
	}
	if _, err := tx.NewUpdate().Model(cr).Set("status = ?", CredentialDeleted).Set("last_error = ''").
		Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record credential %d deleted: %w", cr.ID, err)
	}
	return nil
}

var (
	_ provision.Provisioner = (*CredentialProvisioner)(nil)
	_ provision.Queue       = (*CredentialProvisioner)(nil)
)
