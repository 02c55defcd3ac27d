// Package testcerts makes the certificates of tests that start TLS servers
// of their own: a CA, a server certificate for 127.0.0.1, ::1 and
// localhost, a client certificate, a server certificate that has expired,
// and a second CA that signed none of them. Keys are ECDSA P-256, written
// as PKCS#8 PEM files with mode 0600.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Set is the paths of the PEM files Write made.
type Set struct {
	CA      string // the CA that signed the server and client certificates
	OtherCA string // a CA that signed nothing here: a wrong tls_ca / sslrootcert

	ServerCert, ServerKey   string // valid now, for 127.0.0.1, ::1 and localhost
	ExpiredCert, ExpiredKey string // signed by CA, expired an hour ago
	ClientCert, ClientKey   string // signed by CA, for client authentication
}

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Write makes the certificates in dir (which must exist) and returns their
// paths. clientName is the client certificate's common name.
func Write(dir, clientName string) (*Set, error) {
	now := time.Now()
	ca, err := newCA(dir, "ca", "herd test CA", now)
	if err != nil {
		return nil, err
	}
	if _, err := newCA(dir, "other-ca", "herd test unrelated CA", now); err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	expired := *server
	expired.NotBefore, expired.NotAfter = now.Add(-48*time.Hour), now.Add(-time.Hour)
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: clientName},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range []struct {
		name string
		tmpl *x509.Certificate
	}{{"server", server}, {"expired", &expired}, {"client", client}} {
		if err := ca.sign(dir, c.name, c.tmpl); err != nil {
			return nil, err
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	return &Set{
		CA: p("ca.crt"), OtherCA: p("other-ca.crt"),
		ServerCert: p("server.crt"), ServerKey: p("server.key"),
		ExpiredCert: p("expired.crt"), ExpiredKey: p("expired.key"),
		ClientCert: p("client.crt"), ClientKey: p("client.key"),
	}, nil
}

func newCA(dir, file, name string, now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-72 * time.Hour),
		NotAfter:              now.Add(72 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testcerts: CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, file+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// sign makes a key and a certificate from tmpl signed by a, written to
// dir/name.crt and dir/name.key.
func (a *authority) sign(dir, name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return fmt.Errorf("testcerts: certificate %s: %w", name, err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "PRIVATE KEY", pk, 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

// Pool returns a pool of the certificates in the PEM file at path.
func Pool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("testcerts: %s holds no PEM certificate", path)
	}
	return p, nil
}
