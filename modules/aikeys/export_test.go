package aikeys

import "time"

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
