/* The lab's pod sandbox process ("pause"): holds a pod's namespaces while its containers come
 * and go. It is PID 1 of the pod when the pod shares its process namespace, so it reaps
 * orphaned children; it exits on SIGINT or SIGTERM (the kubelet stopping the sandbox). Written
 * for Atoll's lab; built statically with Debian's gcc (hack/lab-images.sh). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int signal_number) {
  (void)signal_number;
  _exit(0);
}

static void reap(int signal_number) {
  (void)signal_number;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("atoll-lab-pause 1");
    return 0;
  }
  struct sigaction stop = {.sa_handler = leave};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
