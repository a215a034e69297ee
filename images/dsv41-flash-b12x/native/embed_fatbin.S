/* The device code of an aarch64 stand-in library: fatbins that nvcc wrote
 * (`nvcc --fatbin`; GPU code is the same whatever the host), placed where
 * nvcc's own host objects put them, the .nv_fatbin section, one container
 * after the other at 8-byte alignment.  FATBIN (and FATBIN2) name the files;
 * the cross toolchain makes the aarch64 ELF around them. */
	.section .nv_fatbin, "a"
	.balign 8
	.incbin FATBIN
#ifdef FATBIN2
	.balign 8
	.incbin FATBIN2
#endif
	.section .note.GNU-stack, "", %progbits
