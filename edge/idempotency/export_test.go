package idempotency

// EntryKey lets the black-box tests look at an entry in Redis.
var EntryKey = entryKey
