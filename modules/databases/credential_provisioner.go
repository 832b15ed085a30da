package databases

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// CredentialKind is the finisher's name for access credentials.
const CredentialKind provision.Kind = "credential"

// CredentialProvisioner finishes access credentials a crash or a failed engine call left
// in-between: a Creating row (the client never got its password) is undone and a Deleting row is
// dropped; both end Deleted. Credentials are never created by the finisher. A Creating row belongs
// to the request that inserted it for provision.RequestGrace: the request locks it right after the
// insert and holds the lock while it asks the engine, and the finisher skips locked rows.
type CredentialProvisioner struct {
	provision.Spec
	engines *Engines
}

// Create is never called (no status maps to it): only a request creates a credential, because
// only the request can hand its password to the client.
func (p *CredentialProvisioner) Create(context.Context, provision.CreateRequest) (provision.CreateResponse, error) {
	return provision.CreateResponse{}, errors.New("access credentials are created by their request only")
}

// Delete drops the credential's role, if this credential made it, and marks the row Deleted. A
// role that is gone, or was not made for this credential, is not an error.
func (p *CredentialProvisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	cr, err := provision.Load[Credential](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	return provision.DeleteResponse{}, dropCredential(ctx, req.Tx, p.engines, cr)
}

// dropCredential drops cr's marked role on its database's engine (nothing to do once the database
// is Deleted: its credentials' roles went with it) and marks the row Deleted through tx.
func dropCredential(ctx context.Context, tx bun.IDB, engines *Engines, cr *Credential) error {
	inst, err := provision.Load[Instance](ctx, tx, cr.DatabaseInstanceID)
	if err != nil {
		return err
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
	if _, err := provision.Succeed(tx.NewUpdate().Model(cr), CredentialDeleted).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record credential %d deleted: %w", cr.ID, err)
	}
	return nil
}
