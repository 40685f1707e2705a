#include <stdio.h>
#include <time.h>
static double ns(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec*1e9+t.tv_nsec;}
#define R10(x) x x x x x x x x x x
#define BODY(K) R10(K)
int main(void){
  double ghz=3.85; // replaced below by measured add chain
  // measure clock via add chain
  { unsigned long x=1,y=1; double s=ns(); for(long i=0;i<200000;i++){ __asm__ volatile(R10(R10("add %1,%0\n\t")):"+r"(x):"r"(y)); } double e=ns(); ghz=200000*100/(e-s); }
  printf("clock %.3f GHz\n",ghz);
#define RUN(N, ASM) { double best=0; for(int r=0;r<5;r++){ double s=ns(); for(long i=0;i<200000;i++){ __asm__ volatile(ASM ::: "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11","xmm12","xmm13","xmm14","xmm15","xmm16","xmm17","xmm18","xmm19","xmm20","xmm21","xmm22","xmm23"); } double e=ns(); double ipc=200000.0*N*10/((e-s)*ghz); if(ipc>best)best=ipc;} printf("%-10s %2d accs: %.3f instr/cycle\n", #ASM[0]=='v'?"":"", N, best);}
  __asm__ volatile("vpxord %%zmm30,%%zmm30,%%zmm30\n\tvpxord %%zmm31,%%zmm31,%%zmm31":::"xmm30","xmm31");
#define D(i) "vdpbf16ps %%zmm30,%%zmm31,%%zmm" #i "\n\t"
  printf("vdpbf16ps zmm:\n");
  RUN(1, R10(D(0)))
  RUN(2, R10(D(0) D(1)))
  RUN(4, R10(D(0) D(1) D(2) D(3)))
  RUN(8, R10(D(0) D(1) D(2) D(3) D(4) D(5) D(6) D(7)))
  RUN(12, R10(D(0) D(1) D(2) D(3) D(4) D(5) D(6) D(7) D(8) D(9) D(10) D(11)))
  RUN(16, R10(D(0) D(1) D(2) D(3) D(4) D(5) D(6) D(7) D(8) D(9) D(10) D(11) D(12) D(13) D(14) D(15)))
  RUN(24, R10(D(0) D(1) D(2) D(3) D(4) D(5) D(6) D(7) D(8) D(9) D(10) D(11) D(12) D(13) D(14) D(15) D(16) D(17) D(18) D(19) D(20) D(21) D(22) D(23)))
#define F(i) "vfmadd231ps %%zmm30,%%zmm31,%%zmm" #i "\n\t"
  printf("vfmadd231ps zmm:\n");
  RUN(1, R10(F(0)))
  RUN(8, R10(F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)))
  RUN(12, R10(F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)))
  return 0;
}
