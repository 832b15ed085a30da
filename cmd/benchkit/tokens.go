package main

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"provisioner/platform/authn"
)

// tokens starts a sign-in session for each of the first n live users of the control database at
// dsn (lowest ids first) and prints an access token per user, one a line, signed with the
// service's key, issuer and audience.
func tokens(dsn string, n int, o authn.Options) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	t, err := authn.NewTokens(o)
	if err != nil {
		log.Fatal(err)
	}
	rows, err := conn.Query(ctx, `INSERT INTO auth_sessions (user_id, provider, stamp, role, expires_at)
		SELECT id, 'password', security_stamp, role, now() + interval '1 day' FROM users
		WHERE deleted_at IS NULL AND role = 'User' ORDER BY id LIMIT $1
		RETURNING id, user_id, stamp, role`, n)
	if err != nil {
		log.Fatal(err)
	}
	type session struct{ id, user, stamp int64 }
	var sessions []session
	var roles []string
	for rows.Next() {
		var s session
		var role string
		if err := rows.Scan(&s.id, &s.user, &s.stamp, &role); err != nil {
			log.Fatal(err)
		}
		sessions, roles = append(sessions, s), append(roles, role)
	}
	if err := rows.Err(); err != nil {
		log.Fatal(err)
	}
	for i, s := range sessions {
		var email, name string
		if err := conn.QueryRow(ctx, "SELECT email, full_name FROM users WHERE id = $1", s.user).Scan(&email, &name); err != nil {
			log.Fatal(err)
		}
		tok, err := t.Issue(authn.User{ID: s.user, Email: email, Name: name, Role: roles[i], SecurityStamp: s.stamp, SessionID: s.id})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(tok.Token)
	}
}
