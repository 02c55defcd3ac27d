package sqlitestore

import (
	"database/sql"
	"os"
	"time"
)

// cutTies, in a write transaction on a group, forgets the ties of ended
// sessions (removing their lock files once committed: removeTies), marks
// cut every tie whose lock is free, caps each cut session's expiry at cut
// + grace (again, if a renewal moved it), expires the sessions now due,
// and returns the time until the earliest end of a cut session (0 if
// none). A group without ties costs one read.
func (w *wtx) cutTies() (time.Duration, error) {
	if w.g == nil {
		return 0, nil
	}
	var has bool
	if err := w.row(qGroupHasTies, w.g.id).Scan(&has); err != nil || !has {
		return 0, err
	}
	if err := w.forgetTies(); err != nil {
		return 0, err
	}
	type probe struct {
		id string
		k  fileKey
	}
	var uncut []probe
	rows, err := w.rows(qTies, w.g.id)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var p probe
		var dev, ino int64
		var cut sql.NullInt64
		if err := rows.Scan(&p.id, &dev, &ino, &cut); err != nil {
			rows.Close()
			return 0, err
		}
		p.k = fileKey{dev: uint64(dev), ino: uint64(ino)}
		if !cut.Valid {
			uncut = append(uncut, p)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, p := range uncut {
		// An error (too many open files) leaves the tie to the next call.
		if free, err := tieFree(w.s.tiePath(p.id), p.k); err == nil && free {
			if _, err := w.exec(qCutTie, w.us, w.g.id, p.id); err != nil {
				return 0, err
			}
		}
	}
	if _, err := w.exec(qCapCutTies, w.g.id); err != nil {
		return 0, err
	}
	if err := w.expireDue(); err != nil {
		return 0, err
	}
	var next sql.NullInt64
	if err := w.row(qNextCut, w.g.id).Scan(&next); err != nil || !next.Valid {
		return 0, err
	}
	return time.Duration(max(next.Int64-w.us, 1)) * time.Microsecond, nil
}

// forgetTies deletes the ties of the group's ended sessions, and removes
// their lock files after the commit (if the path still names the file
// tied: a file put in its place is not removed).
func (w *wtx) forgetTies() error {
	rows, err := w.rows(qForgetTies, w.g.id, w.g.id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var dev, ino int64
		if err := rows.Scan(&id, &dev, &ino); err != nil {
			return err
		}
		w.removeAfter = append(w.removeAfter, tieFile{path: w.s.tiePath(id), k: fileKey{dev: uint64(dev), ino: uint64(ino)}})
	}
	return rows.Err()
}

// dropTieFiles, before a group is deleted, notes the lock files of all its
// ties, to remove once committed (each if the path still names the file
// tied): a live member's tie is then lost, as its group is gone.
func (w *wtx) dropTieFiles() error {
	rows, err := w.rows(qTies, w.g.id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var dev, ino int64
		var cut sql.NullInt64
		if err := rows.Scan(&id, &dev, &ino, &cut); err != nil {
			return err
		}
		w.removeAfter = append(w.removeAfter, tieFile{path: w.s.tiePath(id), k: fileKey{dev: uint64(dev), ino: uint64(ino)}})
	}
	return rows.Err()
}

// tieFile is a tie's lock file to remove once its row is gone.
type tieFile struct {
	path string
	k    fileKey
}

// removeTieFiles removes the lock files of forgotten ties.
func removeTieFiles(fs []tieFile) {
	for _, tf := range fs {
		if f, err := openTie(tf.path, tf.k); f != nil && err == nil {
			f.Close()
			os.Remove(tf.path)
		}
	}
}
