package auth

// NormalizeStoredEmails is migration 20261124010000_email_forms, for tests that run it under a
// given role.
var NormalizeStoredEmails = normalizeStoredEmails
