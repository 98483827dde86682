/*
 * The peer half of `scripts/peer-kml.sh`: KML's own C library (built from a kernel-ml checkout
 * the user supplies; none of its code is in this repository) running KML's released readahead
 * models on the same rows as iolearn's half, `crates/ml/examples/side_by_side.rs`.
 *
 *   kml_side_by_side KML_MODEL_DIR ROWS_FILE {tree|net} CALLS
 *
 * KML_MODEL_DIR holds nn_arch_data/ and decision_tree_model/ (shared/reference/kml/readahead);
 * ROWS_FILE has 1 to 65536 normalised rows of 5 numbers, used in turn. Each call is what KML's kernel module does per
 * decision: `tree` is predict_decision_tree on a row matrix; `net` is
 * readahead_class_net_inference, matrix_argmax and cleanup_autodiff (FLOAT, batch 1, as the
 * module builds it). Prints ns per call (one timed loop after a warm-up) and the checksum of
 * the predicted classes, which must equal iolearn's.
 */
#include <kml_lib.h>
#include <decision_tree.h>
#include <readahead_net_classification.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROWS 65536

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s KML_MODEL_DIR ROWS_FILE {tree|net} CALLS\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1], *what = argv[3];
  long calls = atol(argv[4]);
  FILE *f = fopen(argv[2], "r");
  if (!f || calls <= 0) {
    fprintf(stderr, "cannot read %s or bad CALLS\n", argv[2]);
    return 2;
  }
  static matrix *rows[MAX_ROWS];
  long n = 0;
  float v[5];
  while (n < MAX_ROWS && fscanf(f, "%f %f %f %f %f", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
    rows[n] = allocate_matrix(1, 5, FLOAT);
    memcpy(rows[n]->vals.f, v, sizeof v);
    n++;
  }
  if (n == 0 || !feof(f)) {
    fprintf(stderr, "%s: expected 1 to %d rows of 5 numbers\n", argv[2], MAX_ROWS);
    return 2;
  }
  fclose(f);
  char p[4096], q[4096];
  long sum = 0;
  double t0, t1;
  if (strcmp(what, "tree") == 0) {
    snprintf(p, sizeof p, "%s/decision_tree_model/readahead_model.dt", dir);
    kml_dt *dt = build_decision_tree_model_from_file(p);
    for (long i = 0, r = 0; i < 100000; i++, r = r + 1 == n ? 0 : r + 1) sum += predict_decision_tree(dt, rows[r]);
    sum = 0;
    t0 = now_ns();
    for (long i = 0, r = 0; i < calls; i++, r = r + 1 == n ? 0 : r + 1) sum += predict_decision_tree(dt, rows[r]);
    t1 = now_ns();
  } else if (strcmp(what, "net") == 0) {
    readahead_model_config config;
    config.batch_size = 1;
    config.learning_rate = 0.01;
    config.momentum = 0.99;
    config.num_features = 5;
    config.model_type = FLOAT;
    readahead_class_net *net = build_readahead_class_net(&config);
    net->state.is_training = false;
    layer *layers[3] = {net->layer_list->layer_list_head, net->layer_list->layer_list_head->next->next,
                        net->layer_list->layer_list_tail};
    for (int l = 0; l < 3; l++) {
      snprintf(p, sizeof p, "%s/nn_arch_data/linear%d_w.csv", dir, l);
      snprintf(q, sizeof q, "%s/nn_arch_data/linear%d_bias.csv", dir, l);
      set_weights_biases_from_file(layers[l], p, q);
    }
    for (long i = 0, r = 0; i < 10000; i++, r = r + 1 == n ? 0 : r + 1) {
      sum += matrix_argmax(readahead_class_net_inference(rows[r], net));
      cleanup_autodiff(net->layer_list);
    }
    sum = 0;
    t0 = now_ns();
    for (long i = 0, r = 0; i < calls; i++, r = r + 1 == n ? 0 : r + 1) {
      sum += matrix_argmax(readahead_class_net_inference(rows[r], net));
      cleanup_autodiff(net->layer_list);
    }
    t1 = now_ns();
  } else {
    fprintf(stderr, "case must be tree or net\n");
    return 2;
  }
  printf("%.3f ns/call checksum %ld rows %ld\n", (t1 - t0) / calls, sum, n);
  return 0;
}
