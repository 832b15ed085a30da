package app

import (
	"go.uber.org/fx"

	"provisioner/modules/admin"
	"provisioner/modules/aikeys"
	"provisioner/modules/auth"
	"provisioner/modules/databases"
	"provisioner/modules/dns"
	"provisioner/modules/wfauto"
)

// Modules is the one list of resource modules. Adding a module is one line here.
var Modules = []fx.Option{
	auth.Module,
	admin.Module,
	databases.Module,
	dns.Module,
	wfauto.Module,
	aikeys.Module,
}
