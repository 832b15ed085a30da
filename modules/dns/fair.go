package dns

import "provisioner/platform/ratelimit"

// forOwner returns ctx whose provider calls queue for the outbound budget as user's: users are
// served in turn (ratelimit.FairQueue).
var forOwner = ratelimit.WithOwner
