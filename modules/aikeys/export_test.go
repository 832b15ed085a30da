package aikeys

import (
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// SetStreamKeepAlive shortens the keep-alive interval of streams; it answers the restore.
func SetStreamKeepAlive(d time.Duration) func() {
	old := streamKeepAlive.Swap(int64(d))
	return func() { streamKeepAlive.Store(old) }
}

// FastGenerate turns fastGenerate on or off; it answers how many requests it answered so far.
func FastGenerate(on bool) int64 {
	fastGenerateOff.Store(!on)
	return fastGenerateServed.Load()
}

// ReadGenerateLimits is readGenerateLimits, answering whether it accepted doc.
func ReadGenerateLimits(doc *huma.OpenAPI) error {
	_, err := readGenerateLimits(doc)
	return err
}

// ReserveScriptHash and SettleScriptHash are the SHA1 of the budget scripts (EVALSHA's argument).
var ReserveScriptHash, SettleScriptHash = reserveScript.Hash(), settleScript.Hash()
