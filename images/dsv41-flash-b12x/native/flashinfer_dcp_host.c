/* The host side of libflashinfer_dcp.so for aarch64: what flashinfer_dcp.cu
 * defines for the host (the x86-64 library gets it from nvcc), compiled by
 * the cross compiler; the kernels come in embed_fatbin.S. */
int
flashinfer_dcp_version (void)
{
  return 70001;
}
