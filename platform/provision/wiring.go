package provision

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/platform/summary"
)

// Resource provides a resource module's provisioner: build constructs P, which the platform then
// gets as a Provisioner (the Finisher drives its rows) and as a UserReleaser (account deletion).
// P is a whole lifecycle: its rows are queued, given up when attempts run out, and show their
// errors (the compiler checks each at this call).
func Resource[P interface {
	Provisioner
	Queue
	GiveUpper
	ErrorTexter
	UserReleaser
}](build any) fx.Option {
	self := func(p P) P { return p }
	return fx.Provide(build, AsProvisioner(self), AsUserReleaser(self))
}

// Summary is a resource module's part of the dashboard (Key: the user's List) and of the platform
// counts (Key: its rows Creating or Active, one query).
type Summary[V any] struct {
	Key   string
	DB    bun.IDB
	Spec  Spec
	Model any // (*Row)(nil)
	List  func(ctx context.Context, userID int64) ([]V, error)
}

// Summarised provides build's Summary as a summary.DashboardContributor and a summary.Counter.
func Summarised(build any) fx.Option {
	return fx.Provide(summary.AsDashboardContributor(build), summary.AsCounter(build))
}

// DashboardSection implements summary.DashboardContributor.
func (s *Summary[V]) DashboardSection(ctx context.Context, userID int64) (summary.Section, error) {
	list, err := s.List(ctx, userID)
	if err != nil {
		return summary.Section{}, err
	}
	return summary.Section{Key: s.Key, Items: list, Total: len(list)}, nil
}

// PlatformCounts implements summary.Counter.
func (s *Summary[V]) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	n, err := s.DB.NewSelect().Model(s.Model).Where("status IN (?)", bun.In([]string{s.Spec.Creating, s.Spec.Active})).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", s.Key, err)
	}
	return map[string]int64{s.Key: int64(n)}, nil
}
