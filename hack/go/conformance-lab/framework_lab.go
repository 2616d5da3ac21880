package conformance

// Atoll's overlay for conformance-lab.test (hack/conformance-lab.sh): replaces the suite's
// framework.go, whose only function, execCmd, is its only pod-exec path. Under kwok a pod
// exec would run on the host; here the command runs inside the pod's network namespace of the
// data-plane lab (`ip netns exec lab-<uid>`, created by hack/lab-pods.sh), with the pod's
// resolver, as an unprivileged user without capabilities. It refuses to run anywhere but inside the lab's own namespace, which has no route
// out, so no packet of a spec can leave the lab.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	rest "k8s.io/client-go/rest"
)

// sameNamespace tells whether this process runs in the network namespace bound at path.
func sameNamespace(path string) (bool, error) {
	var self, lab syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		return false, err
	}
	if err := syscall.Stat(path, &lab); err != nil {
		return false, err
	}
	return self.Dev == lab.Dev && self.Ino == lab.Ino, nil
}

func execCmd(k8s kubernetes.Interface, _ *rest.Config, podName string, podNamespace string, command []string) ([]byte, []byte, error) {
	labNetns := os.Getenv("ATOLL_LAB_NETNS")
	if labNetns == "" {
		return nil, nil, fmt.Errorf("conformance-lab.test: ATOLL_LAB_NETNS is not set: refusing to exec %q", command)
	}
	inLab, err := sameNamespace("/run/netns/" + labNetns)
	if err != nil || !inLab {
		return nil, nil, fmt.Errorf("conformance-lab.test runs outside network namespace %s (%v): refusing to exec %q", labNetns, err, command)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	pod, err := k8s.CoreV1().Pods(podNamespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	hex := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(hex) < 12 {
		return nil, nil, fmt.Errorf("pod %s/%s has an unexpected uid %q", podNamespace, podName, pod.UID)
	}
	netns := "lab-" + hex[:12]
	if _, err := os.Stat("/run/netns/" + netns); err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no lab network namespace %s yet: %v", podNamespace, podName, netns, err)
	}
	var stdout, stderr bytes.Buffer
	// As a container runs it (hack/lab-net.sh's pod_run): user 65534, no capabilities, no way to
	// gain any, so the command can neither enter another namespace nor change the network.
	args := []string{"netns", "exec", netns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}
	cmd := exec.CommandContext(ctx, "ip", append(args, command...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// As the suite's own exec over the API: a command that fails (non-zero exit, or still running
	// after 4 s) gives an error and no output.
	if err := cmd.Run(); err != nil {
		return []byte{}, []byte{}, fmt.Errorf("%q in pod %s/%s (%s): %w: %s", command, podNamespace, podName, netns, err, stderr.String())
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}
