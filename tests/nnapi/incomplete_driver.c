/* A library named like an NNAPI driver that lacks most of the API: the NNAPI delegate
 * must refuse it, naming what is missing, and fall back to the CPU. */
struct ANeuralNetworksModel;
int ANeuralNetworksModel_create(struct ANeuralNetworksModel** model) {
  (void)model;
  return 0;
}
