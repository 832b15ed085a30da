package app

import (
	"provisioner/modules/admin"
	"provisioner/modules/aikeys"
	"provisioner/modules/auth"
	"provisioner/modules/databases"
	"provisioner/modules/dns"
	"provisioner/modules/queues"
	"provisioner/modules/wfauto"
	"provisioner/platform/module"
)

//go:generate go run ../cmd/configdoc -root ..

// Modules is the one list of resource modules. Adding a module is one line here.
var Modules = []module.Module{
	auth.Module,
	admin.Module,
	databases.Module,
	dns.Module,
	wfauto.Module,
	aikeys.Module,
	queues.Module,
}
