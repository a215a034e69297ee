/* A smoke program that needs no GPU, for the smoke test across nodes on a
 * machine without one (tests/integration/multinode.sh): run in each rank's
 * container as dcp2_smoke would be (same arguments: --rank R --world W),
 * it checks the wiring that dcp2_smoke relies on.  Rank 0 listens at
 * NCCL_COMM_ID's address and port, as NCCL's bootstrap root does; every
 * other rank connects there from its own node and sends its rank; rank 0
 * answers each with the world size it saw.  Then it holds for --hold
 * SECONDS (a test kills a rank's container meanwhile) and passes.
 *
 *   rankcheck ... --rank R --world W [--hold SECONDS] [--fail-rank R]    */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a rank holds before it passes (-DHOLD=600: a test kills one
 * meanwhile); --hold overrides it. */
#ifndef HOLD
#define HOLD 0
#endif

static int
fail (const char *what)
{
  printf ("rankcheck: FAIL: %s: %s\n", what, strerror (errno));
  return 1;
}

int
main (int argc, char **argv)
{
  int rank = -1, world = 0, hold = HOLD, fail_rank = -1;
  for (int i = 1; i + 1 < argc; i++)
    {
      if (strcmp (argv[i], "--rank") == 0)
        rank = atoi (argv[i + 1]);
      else if (strcmp (argv[i], "--world") == 0)
        world = atoi (argv[i + 1]);
      else if (strcmp (argv[i], "--hold") == 0)
        hold = atoi (argv[i + 1]);
      else if (strcmp (argv[i], "--fail-rank") == 0)
        fail_rank = atoi (argv[i + 1]);
    }
  setvbuf (stdout, NULL, _IOLBF, 0);
  const char *id = getenv ("NCCL_COMM_ID");
  char host[256] = "";
  gethostname (host, sizeof (host));
  printf ("rankcheck: rank %d of %d, NCCL_COMM_ID %s\n", rank, world, id ? id : "(unset)");
  if (rank < 0 || world < 1 || id == NULL || strchr (id, ':') == NULL)
    return fail ("no rank, world or NCCL_COMM_ID");
  char addr[256];
  snprintf (addr, sizeof (addr), "%.*s", (int) (strrchr (id, ':') - id), id);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) atoi (strrchr (id, ':') + 1)) };
  if (inet_pton (AF_INET, addr, &sa.sin_addr) != 1)
    return fail ("NCCL_COMM_ID is not IPv4:PORT");
  int s = socket (AF_INET, SOCK_STREAM, 0);
  if (rank == 0)
    {
      int one = 1;
      setsockopt (s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
      if (bind (s, (struct sockaddr *) &sa, sizeof (sa)) < 0 || listen (s, 64) < 0)
        return fail ("bind NCCL_COMM_ID");
      for (int n = 1; n < world; n++)
        {
          int c = accept (s, NULL, NULL);
          int peer = -1;
          if (c < 0 || read (c, &peer, sizeof (peer)) != sizeof (peer) || write (c, &world, sizeof (world)) < 0)
            return fail ("accept a rank");
          printf ("rankcheck: rank 0 met rank %d\n", peer);
          close (c);
        }
    }
  else
    {
      int seen = 0, tries = 0;
      while (connect (s, (struct sockaddr *) &sa, sizeof (sa)) < 0)
        {
          if (++tries > 600)
            return fail ("connect to rank 0");
          close (s);
          s = socket (AF_INET, SOCK_STREAM, 0);
          usleep (100000);
        }
      if (write (s, &rank, sizeof (rank)) != sizeof (rank) || read (s, &seen, sizeof (seen)) != sizeof (seen))
        return fail ("talk to rank 0");
      printf ("rankcheck: rank %d met rank 0 (world %d)\n", rank, seen);
    }
  close (s);
  if (rank == fail_rank)
    {
      printf ("rankcheck: FAIL: rank %d fails as asked\n", rank);
      return 1;
    }
  for (int i = 0; i < hold; i++)
    sleep (1);
  printf ("rankcheck: rank %d PASS\n", rank);
  return 0;
}
