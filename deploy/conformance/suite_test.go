// The upstream e2e specs that exercise workload controllers, built from the same k8s.io/kubernetes module as
// the local control plane and run against it (see docs/conformance.md and build.sh beside this file).
//
// This is mini-kcm's own test main: it registers the e2e framework's flags, prepares the suite the way the
// specs expect (schedulable nodes counted, IP family known) and hands over to Ginkgo. The specs themselves
// come from the imported upstream packages; which of them run is chosen with --ginkgo.focus/--ginkgo.skip.
package conformance

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"

	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The spec packages: sig-apps (Deployment, ReplicaSet, DaemonSet, ControllerRevision, Disruption), and
	// the apimachinery and kubectl specs that drive Deployments and ReplicaSets.
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/kubectl"

	// Framework extensions the specs are written against: every spec checks afterwards that all nodes are
	// still Ready, failures dump the namespace's objects and events, gomega prints objects readably.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	// (test/utils/format before 1.37: build.sh rewrites this import for older versions.)
	_ "k8s.io/kubernetes/test/utils/ktesting/format"

	// Makes every client constructor available (the kubeconfig of a local plane uses client certificates).
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	// Registers klog's flags (-v) on the command line.
	_ "k8s.io/component-base/logs/testinit"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()

	// Manifests and fixtures some specs read, served from the files embedded in the module.
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())

	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// Once per run: the plane's nodes must be schedulable before any spec creates pods, and specs that size
// themselves by the cluster read the number of ready schedulable nodes.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	client, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client from --kubeconfig")
	timeouts := framework.NewTimeoutContext()
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, client, timeouts.NodeSchedulable))
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		nodes, err := e2enode.GetReadySchedulableNodes(ctx, client)
		framework.ExpectNoError(err)
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	return nil
}, func(ctx context.Context, _ []byte) {
	// Some specs build addresses by IP family; the plane's is that of the kubernetes Service.
	client, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client from --kubeconfig")
	service, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	framework.ExpectNoError(err, "reading the kubernetes Service")
	framework.TestContext.IPFamily = "ipv4"
	if utilnet.IsIPv6String(service.Spec.ClusterIP) {
		framework.TestContext.IPFamily = "ipv6"
	}
})

func TestUpstreamSpecs(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	// The specs log through contextual loggers; logs.InitLogs turns that off, so turn it back on.
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "upstream workload-controller specs against mini-kcm's local plane", suiteConfig, reporterConfig)
}
