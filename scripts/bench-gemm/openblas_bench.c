// OpenBLAS sgemm reference for scripts/bench-gemm.sh (benchmark only; never part of Hone's
// build). Reads lines "SHAPE <name> <op> <m> <n> <k>" on stdin (op: NN, NT, TN, packed-NT;
// packed-NT is timed as NT), runs cblas_sgemm row-major with alpha 1, beta 0 on random data
// for at least MIN_SECONDS per shape, and prints "OPENBLAS <name> <GFLOP/s>".
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_SECONDS 1.0

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *randv(size_t n) {
	float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) / 64 * 64);
	for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
	return p;
}

int main(void) {
	char line[512], name[256], op[32];
	int m, n, k;
	while (fgets(line, sizeof line, stdin)) {
		if (sscanf(line, "SHAPE %255s %31s %d %d %d", name, op, &m, &n, &k) != 5) continue;
		int ta = strcmp(op, "TN") == 0, tb = strstr(op, "NT") != NULL;
		float *a = randv((size_t)m * k), *b = randv((size_t)k * n), *c = randv((size_t)m * n);
		int lda = ta ? m : k, ldb = tb ? k : n;
		enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
		cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1, a, lda, b, ldb, 0, c, n); // warm up
		long iters = 0;
		double t0 = now(), t;
		do {
			cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1, a, lda, b, ldb, 0, c, n);
			iters++;
			t = now() - t0;
		} while (t < MIN_SECONDS);
		printf("OPENBLAS %s %.3f\n", name, 2.0 * m * n * k * iters / t / 1e9);
		fflush(stdout);
		free(a);
		free(b);
		free(c);
	}
	return 0;
}
