/* The host side of the aarch64 NCCL stand-in (libnccl.so.2): NCCL's version
 * call.  Its device code is NCCL 2.28.9's own (the x86-64 library's sm_120
 * SASS and compute_120 PTX, scripts/fatbin-select.py) in embed_fatbin.S. */
typedef enum
{
  ncclSuccess = 0,
  ncclInvalidArgument = 4
} ncclResult_t;

ncclResult_t
ncclGetVersion (int *version)
{
  if (version == 0)
    return ncclInvalidArgument;
  *version = 22809; /* 2.28.9, the x86-64 library it comes from */
  return ncclSuccess;
}
