package io.deltatx.spark;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.TaskContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.vectorized.OffHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;
import org.apache.spark.util.TaskCompletionListener;
import org.roaringbitmap.BatchIterator;
import org.roaringbitmap.RoaringBitmap;

/**
 * Spark's Parquet reader, plus one boolean column that says whether the Delta table's deletion
 * vectors delete the row.
 *
 * <p>deltatx (Python) plans the scan and names, in the option {@link #VECTORS_OPTION}, every
 * file it reads and where that file's deletion vector is stored. Each task reads the vectors of
 * its own files, so what a task carries grows with the number of files and never with the
 * number of deleted rows. A file with a vector is read whole by one task with no filter pushed
 * into the Parquet reader, so its rows arrive in file order and their positions are counted
 * here rather than asked of Spark's reader (which fills a row-position column one boxed value
 * at a time); the count is checked against the file's {@code numRecords} at its end. Files
 * without a vector read exactly as Parquet does.
 *
 * <p>Compiled by deltatx with Janino, the compiler Spark ships, so it needs no JDK: it keeps to
 * the Java that Janino accepts (raw Scala types, explicit casts, no lambdas).
 */
public class DeletionVectorParquetFormat extends ParquetFileFormat {
  /** The column, last in the schema given to the reader, that is true for a deleted row. */
  public static final String DELETED_COLUMN = "__deltatx_is_row_deleted";

  /**
   * One line per file: the URL-encoded file URI, a tab, then {@code -} for a file without a
   * vector, {@code f<TAB>vector file URI<TAB>offset<TAB>size<TAB>cardinality<TAB>numRecords}
   * for a stored vector, or {@code i<TAB>hex bitmap<TAB>cardinality<TAB>numRecords} for an
   * inline one ({@code numRecords} is -1 when the log does not record it).
   */
  public static final String VECTORS_OPTION = "deltatx.deletionVectors";

  static final int PORTABLE_MAGIC = 1681511377;
  static final int NATIVE_MAGIC = 1681511376;

  private transient String parsedText;
  private transient HashMap parsed;

  public String shortName() {
    return "deltatx-parquet";
  }

  public String toString() {
    return "Parquet with deletion vectors";
  }

  public boolean equals(Object other) {
    return other instanceof DeletionVectorParquetFormat;
  }

  public int hashCode() {
    return DeletionVectorParquetFormat.class.hashCode();
  }

  /** A file with a vector is read whole: its rows are counted from the first. */
  public boolean isSplitable(
      SparkSession spark, scala.collection.immutable.Map options, Path path) {
    Object spec = vectors(options).get(key(path));
    if (spec != null && !"-".equals(spec)) {
      return false;
    }
    return super.isSplitable(spark, options, path);
  }

  public scala.Function1 buildReaderWithPartitionValues(
      SparkSession spark,
      StructType dataSchema,
      StructType partitionSchema,
      StructType requiredSchema,
      scala.collection.immutable.Seq filters,
      scala.collection.immutable.Map options,
      Configuration hadoopConf) {
    scala.Option found = requiredSchema.getFieldIndex(DELETED_COLUMN);
    if (found.isEmpty()) {
      return super.buildReaderWithPartitionValues(
          spark, dataSchema, partitionSchema, requiredSchema, filters, options, hadoopConf);
    }
    int position = ((Integer) found.get()).intValue();
    if (position != requiredSchema.length() - 1 || partitionSchema.length() != 0) {
      throw new IllegalArgumentException(
          DELETED_COLUMN + " must be the last column read, with no partition columns");
    }
    StructType data = without(dataSchema);
    StructType required = without(requiredSchema);
    // Each reader Spark builds broadcasts the Hadoop configuration: build the one that pushes
    // filters only when there is a filter to push.
    scala.collection.immutable.Seq pushed = withoutColumn(filters);
    scala.Function1 whole =
        super.buildReaderWithPartitionValues(
            spark,
            data,
            partitionSchema,
            required,
            (scala.collection.immutable.Seq) scala.collection.immutable.Nil$.MODULE$,
            options,
            hadoopConf);
    scala.Function1 filtered =
        pushed.isEmpty()
            ? whole
            : super.buildReaderWithPartitionValues(
                spark, data, partitionSchema, required, pushed, options, hadoopConf);
    return new Reader(
        filtered,
        whole,
        vectors(options),
        spark.sparkContext().broadcast(
            new SerializableConfiguration(hadoopConf),
            scala.reflect.ClassTag$.MODULE$.apply(SerializableConfiguration.class)),
        position,
        SQLConf.get().offHeapColumnVectorEnabled());
  }

  private synchronized HashMap vectors(scala.collection.immutable.Map options) {
    String text = (String) options.get(VECTORS_OPTION).getOrElse(null);
    if (text == null) {
      throw new IllegalArgumentException("the option " + VECTORS_OPTION + " is required");
    }
    if (!text.equals(parsedText)) {
      HashMap out = new HashMap();
      String[] lines = text.split("\n");
      for (int i = 0; i < lines.length; i++) {
        if (lines[i].isEmpty()) {
          continue;
        }
        int tab = lines[i].indexOf('\t');
        out.put(key(new Path(decode(lines[i].substring(0, tab)))), lines[i].substring(tab + 1));
      }
      parsed = out;
      parsedText = text;
    }
    return parsed;
  }

  /** A file's identity whatever way its URI is spelt ({@code file:/x} or {@code file:///x}). */
  static String key(Path path) {
    URI uri = path.toUri();
    if (uri.getScheme() == null) {
      throw new IllegalArgumentException("deltatx names files by URI, not " + path);
    }
    String authority = uri.getAuthority() == null ? "" : uri.getAuthority();
    return uri.getScheme() + "://" + authority + uri.getPath();
  }

  static String decode(String text) {
    return URLDecoder.decode(text, StandardCharsets.UTF_8);
  }

  static StructType without(StructType schema) {
    StructField[] fields = schema.fields();
    List kept = new ArrayList();
    for (int i = 0; i < fields.length; i++) {
      if (!fields[i].name().equals(DELETED_COLUMN)) {
        kept.add(fields[i]);
      }
    }
    return new StructType((StructField[]) kept.toArray(new StructField[0]));
  }

  /** The filters that Parquet may push down: none may name the column it does not store. */
  static scala.collection.immutable.Seq withoutColumn(scala.collection.immutable.Seq filters) {
    List kept = new ArrayList();
    List all = scala.jdk.javaapi.CollectionConverters.asJava(filters);
    for (int i = 0; i < all.size(); i++) {
      Filter filter = (Filter) all.get(i);
      String[] names = filter.references();
      boolean ours = false;
      for (int j = 0; j < names.length; j++) {
        ours = ours || names[j].equals(DELETED_COLUMN);
      }
      if (!ours) {
        kept.add(filter);
      }
    }
    return scala.jdk.javaapi.CollectionConverters.asScala(kept).toList();
  }

  static byte[] hex(String text) {
    byte[] out = new byte[text.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** The 32-bit bitmaps of a serialized RoaringBitmapArray, by high key (null where empty). */
  static RoaringBitmap[] parse(byte[] data) throws IOException {
    ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
    List keys = new ArrayList();
    List maps = new ArrayList();
    int magic = in.getInt();
    if (magic == PORTABLE_MAGIC) {
      long count = in.getLong();
      int previous = -1;
      for (long i = 0; i < count; i++) {
        int key = in.getInt();
        if (key < 0 || key <= previous) {
          throw new IOException("bad RoaringBitmapArray bucket key " + key);
        }
        previous = key;
        RoaringBitmap map = new RoaringBitmap();
        map.deserialize(((ByteBuffer) in.slice()).order(ByteOrder.LITTLE_ENDIAN));
        in.position(in.position() + map.serializedSizeInBytes());
        keys.add(Integer.valueOf(key));
        maps.add(map);
      }
    } else if (Integer.reverseBytes(magic) == NATIVE_MAGIC) {
      in.order(ByteOrder.BIG_ENDIAN);
      int count = in.getInt();
      for (int i = 0; i < count; i++) {
        int size = in.getInt();
        RoaringBitmap map = new RoaringBitmap();
        map.deserialize(((ByteBuffer) in.slice()).order(ByteOrder.LITTLE_ENDIAN));
        if (map.serializedSizeInBytes() != size) {
          throw new IOException("a native bitmap is not of its recorded size " + size);
        }
        in.position(in.position() + size);
        keys.add(Integer.valueOf(i));
        maps.add(map);
      }
    } else {
      throw new IOException(
          "bad deletion vector magic number " + magic + " (expected " + PORTABLE_MAGIC + ")");
    }
    if (in.hasRemaining()) {
      throw new IOException(in.remaining() + " unexpected bytes after the bitmap");
    }
    int top = keys.isEmpty() ? 0 : ((Integer) keys.get(keys.size() - 1)).intValue() + 1;
    RoaringBitmap[] out = new RoaringBitmap[top];
    for (int i = 0; i < keys.size(); i++) {
      out[((Integer) keys.get(i)).intValue()] = (RoaringBitmap) maps.get(i);
    }
    return out;
  }

  /** Reads one file: its rows, and for each whether its vector deletes it. */
  static final class Reader extends scala.runtime.AbstractFunction1 implements Serializable {
    private final scala.Function1 filtered;
    private final scala.Function1 whole;
    private final HashMap vectors;
    private final Broadcast conf;
    private final int position;
    private final boolean offHeap;
    private transient HashMap streams;

    Reader(
        scala.Function1 filtered,
        scala.Function1 whole,
        HashMap vectors,
        Broadcast conf,
        int position,
        boolean offHeap) {
      this.filtered = filtered;
      this.whole = whole;
      this.vectors = vectors;
      this.conf = conf;
      this.position = position;
      this.offHeap = offHeap;
    }

    private static IllegalStateException unreadable(String where, Exception cause) {
      return new IllegalStateException(
          "deltatx scan: the " + where + " cannot be read: " + cause, cause);
    }

    /**
     * The open vector file at {@code uri}, its version checked. One delete writes the vectors
     * of all its files into one file, so a task keeps each file it opens until it ends.
     */
    private FSDataInputStream stream(String uri) throws IOException {
      if (streams == null) {
        streams = new HashMap();
        final HashMap opened = streams;
        TaskContext task = TaskContext.get();
        if (task != null) {
          task.addTaskCompletionListener(
              new TaskCompletionListener() {
                public void onTaskCompletion(TaskContext context) {
                  java.util.Iterator each = opened.values().iterator();
                  while (each.hasNext()) {
                    try {
                      ((FSDataInputStream) each.next()).close();
                    } catch (IOException e) {
                      // Read-only streams: nothing is lost when one fails to close.
                    }
                  }
                }
              });
        }
      }
      FSDataInputStream in = (FSDataInputStream) streams.get(uri);
      if (in == null) {
        Path path = new Path(uri);
        FileSystem fs = path.getFileSystem(((SerializableConfiguration) conf.value()).value());
        in = fs.open(path);
        streams.put(uri, in);
        byte[] version = new byte[1];
        in.readFully(0, version);
        if (version[0] != 1) {
          throw new IOException("unknown deletion vector file version " + version[0]);
        }
      }
      return in;
    }

    public Object apply(Object argument) {
      PartitionedFile file = (PartitionedFile) argument;
      String name = key(file.toPath());
      String spec = (String) vectors.get(name);
      if (spec == null) {
        throw new IllegalStateException(
            "deltatx scan: data file " + name + " is not among the files the log names");
      }
      if (spec.equals("-")) {
        scala.collection.Iterator rows = (scala.collection.Iterator) filtered.apply(file);
        return new Rows(rows, null, -1, position, offHeap, name);
      }
      if (file.start() != 0) {
        throw new IllegalStateException(
            "deltatx scan: data file " + name + " has a deletion vector but was split");
      }
      String[] parts = spec.split("\t");
      String where = "deletion vector of data file " + name;
      RoaringBitmap[] bitmaps;
      long cardinality;
      long records;
      try {
        if (parts[0].equals("i")) {
          bitmaps = parse(hex(parts[1]));
          cardinality = Long.parseLong(parts[2]);
          records = Long.parseLong(parts[3]);
        } else {
          String vector = decode(parts[1]);
          where = where + " (file " + vector + " at offset " + parts[2] + ")";
          bitmaps = parse(read(vector, Long.parseLong(parts[2]), Integer.parseInt(parts[3])));
          cardinality = Long.parseLong(parts[4]);
          records = Long.parseLong(parts[5]);
        }
      } catch (IOException e) {
        throw unreadable(where, e);
      } catch (RuntimeException e) {
        // A truncated bitmap runs the buffer out.
        throw unreadable(where, e);
      }
      long total = 0;
      for (int i = 0; i < bitmaps.length; i++) {
        total += bitmaps[i] == null ? 0 : bitmaps[i].getLongCardinality();
      }
      if (total != cardinality) {
        throw new IllegalStateException("deltatx scan: the " + where + " holds " + total
            + " rows where the log says " + cardinality);
      }
      scala.collection.Iterator rows = (scala.collection.Iterator) whole.apply(file);
      return new Rows(rows, bitmaps, records, position, offHeap, name);
    }

    private byte[] read(String uri, long offset, int size) throws IOException {
      byte[] framed = new byte[size + 8];
      stream(uri).readFully(offset, framed);
      ByteBuffer frame = ByteBuffer.wrap(framed).order(ByteOrder.BIG_ENDIAN);
      int stored = frame.getInt(0);
      if (stored != size) {
        throw new IOException(
            "the file stores a " + stored + "-byte deletion vector, the log says " + size);
      }
      byte[] bitmap = new byte[size];
      System.arraycopy(framed, 4, bitmap, 0, size);
      CRC32 crc = new CRC32();
      crc.update(bitmap, 0, size);
      if ((int) crc.getValue() != frame.getInt(4 + size)) {
        throw new IOException("checksum mismatch (corrupt file)");
      }
      return bitmap;
    }
  }

  /** The reader's batches (or rows) with the deleted-row column added after the data. */
  static final class Rows extends scala.collection.AbstractIterator {
    private final scala.collection.Iterator rows;
    private final RoaringBitmap[] bitmaps;
    private final long records;
    private final int position;
    private final boolean offHeap;
    private final String name;
    private final GenericInternalRow flag = new GenericInternalRow(1);
    private final JoinedRow joined = new JoinedRow();
    private long next;
    private WritableColumnVector flags;
    private byte[] scratch;
    private ColumnarBatch source;
    private ColumnarBatch target;
    // The deleted rows not yet reached, taken from the bitmaps a buffer at a time: rows come
    // in file order, so each deleted row is looked at once, in bulk, whatever the batch size.
    private final int[] pending = new int[1024];
    private int at;
    private int count;
    private int key = -1;
    private BatchIterator batches;
    private boolean exhausted;

    Rows(
        scala.collection.Iterator rows,
        RoaringBitmap[] bitmaps,
        long records,
        int position,
        boolean offHeap,
        String name) {
      this.rows = rows;
      this.bitmaps = bitmaps;
      this.records = records;
      this.position = position;
      this.offHeap = offHeap;
      this.name = name;
    }

    public boolean hasNext() {
      boolean more = rows.hasNext();
      if (!more && bitmaps != null) {
        if (records >= 0 && next != records) {
          throw new IllegalStateException("deltatx scan: read " + next + " rows of data file "
              + name + " where the log records " + records);
        }
        if (flags != null && !exhausted && (at < count || refill())) {
          long row = (((long) key) << 32) | (pending[at] & 0xFFFFFFFFL);
          throw new IllegalStateException("deltatx scan: the deletion vector of data file "
              + name + " deletes row " + row + " of its " + next);
        }
      }
      return more;
    }

    public Object next() {
      Object item = rows.next();
      if (item instanceof ColumnarBatch) {
        return withFlags((ColumnarBatch) item);
      }
      flag.setBoolean(0, bitmaps != null && deleted(next));
      next++;
      return joined.apply((InternalRow) item, flag);
    }

    private ColumnarBatch withFlags(ColumnarBatch batch) {
      int n = batch.numRows();
      if (flags == null || scratch.length < n) {
        scratch = new byte[Math.max(n, 4096)];
        flags = vector(scratch.length);
        flags.putBooleans(0, scratch.length, false);
        source = null;
      }
      if (bitmaps != null) {
        java.util.Arrays.fill(scratch, 0, n, (byte) 0);
        mark(next, n);
        flags.putBytes(0, n, scratch, 0);
      }
      next += n;
      if (batch != source) {
        ColumnVector[] columns = new ColumnVector[batch.numCols() + 1];
        for (int i = 0; i < position; i++) {
          columns[i] = batch.column(i);
        }
        columns[position] = flags;
        for (int i = position; i < batch.numCols(); i++) {
          columns[i + 1] = batch.column(i);
        }
        target = new ColumnarBatch(columns);
        source = batch;
      }
      target.setNumRows(n);
      return target;
    }

    private WritableColumnVector vector(int size) {
      if (!offHeap) {
        return new OnHeapColumnVector(size, DataTypes.BooleanType);
      }
      final OffHeapColumnVector out = new OffHeapColumnVector(size, DataTypes.BooleanType);
      TaskContext task = TaskContext.get();
      if (task != null) {
        task.addTaskCompletionListener(
            new TaskCompletionListener() {
              public void onTaskCompletion(TaskContext context) {
                out.close();
              }
            });
      }
      return out;
    }

    private boolean deleted(long row) {
      int high = (int) (row >>> 32);
      return high < bitmaps.length && bitmaps[high] != null && bitmaps[high].contains((int) row);
    }

    /** Marks in {@code scratch} each deleted row among the n rows from row {@code start} on. */
    private void mark(long start, int n) {
      long end = start + n;
      while (!exhausted) {
        if (at == count && !refill()) {
          exhausted = true;
          return;
        }
        long row = (((long) key) << 32) | (pending[at] & 0xFFFFFFFFL);
        if (row >= end) {
          return;
        }
        scratch[(int) (row - start)] = 1;
        at++;
      }
    }

    /** Takes the next deleted rows into {@code pending}; false when there are no more. */
    private boolean refill() {
      while (true) {
        if (batches != null && batches.hasNext()) {
          count = batches.nextBatch(pending);
          at = 0;
          if (count > 0) {
            return true;
          }
        } else {
          key++;
          if (key >= bitmaps.length) {
            return false;
          }
          batches = bitmaps[key] == null ? null : bitmaps[key].getBatchIterator();
        }
      }
    }
  }
}
