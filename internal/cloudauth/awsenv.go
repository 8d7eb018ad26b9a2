package cloudauth

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FindAWSCredentials returns the credentials the AWS SDKs would use when
// the config names none: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, else the profile AWS_PROFILE (default "default") of
// the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials). Role assumption, SSO and instance metadata are not
// looked up: the error says so.
func FindAWSCredentials(getenv func(string) string) (AWSCredentials, error) {
	if id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		return AWSCredentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN")}, nil
	}
	path := getenv("AWS_SHARED_CREDENTIALS_FILE")
	if path == "" {
		home := getenv("HOME")
		if home == "" {
			return AWSCredentials{}, fmt.Errorf("aws credentials: none in the config, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY unset and no home directory for ~/.aws/credentials")
		}
		path = filepath.Join(home, ".aws", "credentials")
	}
	profile := getenv("AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	f, err := os.Open(path)
	if err != nil {
		return AWSCredentials{}, fmt.Errorf("aws credentials: none in the config, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY unset, and %v (SSO, roles and instance metadata are not read: export the keys)", err)
	}
	defer f.Close()
	var c AWSCredentials
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			in = strings.TrimSpace(strings.Trim(line, "[]")) == profile
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "aws_access_key_id":
			c.AccessKeyID = strings.TrimSpace(v)
		case "aws_secret_access_key":
			c.SecretAccessKey = strings.TrimSpace(v)
		case "aws_session_token":
			c.SessionToken = strings.TrimSpace(v)
		}
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return AWSCredentials{}, fmt.Errorf("aws credentials: profile %q of %s has no aws_access_key_id and aws_secret_access_key", profile, path)
	}
	return c, nil
}
